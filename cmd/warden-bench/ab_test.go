package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestABReportsMediansAndPairsWon: the A/B summary is the median of each
// side, the median of the differences within pairs (not the difference
// of the medians) and the pairs B won, with the side that went first.
func TestABReportsMediansAndPairsWon(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	ps := []abPair{
		{a: abRun{us(90), 100}, b: abRun{us(80), 110}, aFirst: true},
		{a: abRun{us(120), 90}, b: abRun{us(125), 85}, aFirst: false},
		{a: abRun{us(100), 95}, b: abRun{us(70), 130}, aFirst: true},
		{a: abRun{us(60), 150}, b: abRun{us(64), 140}, aFirst: false},
	}
	got := renderAB("durable (shared token)", 64, ps)
	require.Contains(t, got, "durable (shared token) at 64 connections:")
	require.Contains(t, got, "| 2 | B | 120µs | 125µs | 5µs | 90 | 85 |")
	// A: 60 90 100 120 -> 95; B: 64 70 80 125 -> 75; B - A: -30 -10 4 5 -> -3.
	require.Contains(t, got, "Median CPU a request: A 95µs, B 75µs; median of B - A within a pair -3µs; B lower in 2 of 4 pairs.")
	require.Equal(t, us(7), middle([]time.Duration{us(9), us(7), us(1)}))
}
