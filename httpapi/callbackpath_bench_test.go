package httpapi

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCallbackPath is the HTTP layer alone, both ways, in one run: 64
// kept-alive connections each posting a callback-sized request to a
// handler that reads the body and answers 80 bytes, served by net/http
// (warden's server settings) and by Serve, where the request takes the
// callback path. cpu-ns/op is the process's CPU a request, client included;
// the client is the same in both, so the difference is the server's.
func BenchmarkCallbackPath(b *testing.B) {
	answer := []byte(`{"result":"applied","marquee_id":"m-001","generation":1,"received_generation":1}` + "\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	for _, c := range []struct {
		name  string
		serve func(*http.Server, net.Listener) error
	}{
		{"net-http", func(s *http.Server, ln net.Listener) error { return s.Serve(Listener(ln)) }},
		{"callback", Serve},
	} {
		b.Run(c.name, func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			srv := NewHTTPServer("", h)
			go func() { _ = c.serve(srv, ln) }()
			defer srv.Close()
			before := callbackAnswers.Load()
			body := `{"marquee_id":"m-001","verb":"step","generation":1,"step":"vm_starting"}`
			req := []byte("POST /v1/webhooks/terraform HTTP/1.1\r\nHost: warden\r\nAuthorization: Bearer callback-secret-token\r\n" +
				"Content-Type: application/json\r\nWebhook-Id: bench-1\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body)
			const conns = 64
			per := (b.N + conns - 1) / conns
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu := processCPU(b)
			for range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cn, err := net.Dial("tcp", ln.Addr().String())
					if err != nil {
						b.Error(err)
						return
					}
					defer cn.Close()
					_ = cn.SetDeadline(time.Now().Add(time.Minute))
					rd := bufio.NewReader(cn)
					for range per {
						if _, err := cn.Write(req); err != nil {
							b.Error(err)
							return
						}
						resp, err := http.ReadResponse(rd, nil)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				}()
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(per*conns), "cpu-ns/op")
			want := int64(0)
			if c.name == "callback" {
				want = int64(per * conns)
			}
			if onPath := callbackAnswers.Load() - before; onPath != want {
				b.Fatalf("%d requests took the callback path, not %d", onPath, want)
			}
		})
	}
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
