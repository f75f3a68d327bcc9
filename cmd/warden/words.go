package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// An answer in words: what explain, dry-run and the commands on one
// entity print for a person (-o json or yaml print the answer as it came).

// section is one list of an answer printed under its title, an item a line.
type section struct {
	title, key string
	line       func(item any) string
}

// sectionStyle says how a list of sections prints: after a blank line, and
// "(none)" for an empty list, or left out.
type sectionStyle struct{ blankLine, none bool }

// printSections prints a's lists.
func (o *clientOptions) printSections(a map[string]any, style sectionStyle, secs ...section) {
	for _, sec := range secs {
		items, _ := a[sec.key].([]any)
		if len(items) == 0 && !style.none {
			continue
		}
		if style.blankLine {
			fmt.Fprintln(o.stdout)
		}
		fmt.Fprintf(o.stdout, "%s:\n", sec.title)
		if len(items) == 0 {
			fmt.Fprintln(o.stdout, "  (none)")
		}
		for _, it := range items {
			fmt.Fprintf(o.stdout, "  %s\n", sec.line(it))
		}
	}
}

// fields is an item of an answer's list as its fields.
func fields(item any) map[string]any { m, _ := item.(map[string]any); return m }

// awaitingLine is an input that would move an entity, and when.
func awaitingLine(item any) string {
	m := fields(item)
	if at := str(m, "at"); at != "" {
		return fmt.Sprintf("%s at %s: %s", str(m, "event"), at, str(m, "effect"))
	}
	return fmt.Sprintf("%s: %s", str(m, "event"), str(m, "effect"))
}

// blockedLine is what holds an entity.
func blockedLine(item any) string {
	m := fields(item)
	line := str(m, "what") + ": " + str(m, "detail")
	if u := str(m, "until"); u != "" {
		line += " (until " + u + ")"
	}
	return line
}

// marqueeStateLine is the fields of an explanation's state that say where
// the marquee is, in one line.
func marqueeStateLine(e map[string]any) string {
	st := fields(e["state"])
	line := "state: lifecycle " + str(st, "lifecycle") + ", serving " + str(st, "serving") + ", generation " + str(st, "generation")
	if p := str(st, "progress"); p != "" {
		line += ", progress " + p
	}
	line += ", stuck retries " + str(st, "retry_count")
	if u := str(st, "null_pending_until"); u != "" {
		line += ", a first null pending until " + u
	}
	if a := fields(st["admission"]); a != nil {
		line += ", admission " + str(a, "status") + " in pool " + str(a, "pool")
	}
	if tb := fields(st["tombstone"]); tb != nil {
		line += ", a tombstone: " + str(tb, "reason")
	}
	return line
}

// changeLine is a field a step changed.
func changeLine(item any) string {
	m := fields(item)
	return fmt.Sprintf("%s %s -> %s", str(m, "field"), str(m, "from"), str(m, "to"))
}

// explain prints an explanation (O17): its header line, then its lists.
func (o *clientOptions) explain(path string, header func(map[string]any) string, style sectionStyle, secs ...section) error {
	return o.shown(func(e map[string]any) {
		fmt.Fprintln(o.stdout, header(e))
		o.printSections(e, style, secs...)
	})(o.call(http.MethodGet, path, nil))
}

var listed = sectionStyle{blankLine: true, none: true}

func (o *clientOptions) explainMarquee(id string) error {
	return o.explain("/v1/marquees/"+url.PathEscape(id)+"/explain", func(e map[string]any) string { return id + ": " + str(e, "summary") + "\n" + marqueeStateLine(e) }, listed,
		section{"because (oldest first)", "because", func(item any) string {
			m := fields(item)
			var ch []string
			for _, c := range m["changed"].([]any) {
				ch = append(ch, changeLine(c))
			}
			return fmt.Sprintf("%s %s %s (gen %s): %s", str(m, "at"), str(m, "source"), str(m, "event"), str(m, "generation"), strings.Join(ch, ", "))
		}},
		section{"awaiting", "awaiting", awaitingLine},
		section{"blocked by", "blocked_by", blockedLine},
		section{"refused (newest first)", "refused", func(item any) string {
			m := fields(item)
			gens := "gen " + str(m, "generation")
			if r := str(m, "received_generation"); r != "" {
				gens += ", received " + r
			}
			return fmt.Sprintf("%s %s %s %s (%s): %s", str(m, "at"), str(m, "source"), str(m, "event"), str(m, "result"), gens, str(m, "reason"))
		}})
}

func (o *clientOptions) explainEnv(id string) error {
	return o.explain("/v1/environments/"+url.PathEscape(id)+"/explain", func(e map[string]any) string { return id + ": " + str(e, "summary") }, listed,
		section{"because (verified steps, oldest first)", "because", func(item any) string {
			m := fields(item)
			return fmt.Sprintf("%s %s: %s %s %s", str(m, "at"), str(m, "transition"), str(m, "op"), str(m, "capability"), str(m, "identity"))
		}},
		section{"awaiting", "awaiting", awaitingLine},
		section{"blocked by", "blocked_by", blockedLine},
		section{"refused (newest first)", "refused", func(item any) string {
			m := fields(item)
			return fmt.Sprintf("%s %s %s: %s", str(m, "at"), str(m, "actor"), str(m, "event"), str(m, "reason"))
		}})
}

func (o *clientOptions) explainPool(name string) error {
	return o.explain("/v1/pools/"+url.PathEscape(name)+"/explain", func(e map[string]any) string { return str(e, "summary") },
		sectionStyle{blankLine: true},
		section{"awaiting", "awaiting", awaitingLine},
		section{"blocked by", "blocked_by", blockedLine})
}

// dryRunWords prints a dry run's answer: the result and why, then
// what it would change, start and send, and what would move it after.
func (o *clientOptions) dryRunWords(id string, a map[string]any) {
	line := fmt.Sprintf("%s: would be %s", id, str(a, "result"))
	if r := str(a, "reason"); r != "" {
		line += ": " + r
	}
	fmt.Fprintln(o.stdout, line)
	asIs := func(item any) string { return fmt.Sprint(item) }
	o.printSections(a, sectionStyle{},
		section{"changes", "changes", changeLine},
		section{"would start", "effects", asIs},
		section{"would send", "messages", asIs},
		section{"then awaiting", "awaiting", awaitingLine})
}

// shown prints an answer: -o json or yaml as it came, else in words.
func (o *clientOptions) shown(words func(answer map[string]any)) func(map[string]any, error) error {
	return func(answer map[string]any, err error) error {
		if err != nil {
			return err
		}
		if done, err := o.print(answer); done {
			return err
		}
		words(answer)
		return nil
	}
}

// dryRunShown prints a dry run's answer.
func (o *clientOptions) dryRunShown(id string) func(map[string]any, error) error {
	return o.shown(func(a map[string]any) { o.dryRunWords(id, a) })
}

// show prints a marquee's answer: its id and status.
func (o *clientOptions) show(answer map[string]any, err error) error {
	return o.shown(func(a map[string]any) { fmt.Fprintf(o.stdout, "%s: %s\n", a["id"], a["status"]) })(answer, err)
}

// showEnv prints an environment's answer: the line a person reads after a
// create or a removal.
func (o *clientOptions) showEnv(answer map[string]any, err error) error {
	return o.shown(func(a map[string]any) { raw, _ := json.Marshal(a); fmt.Fprintln(o.stdout, envSummary(raw)) })(answer, err)
}
