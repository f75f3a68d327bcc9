package driver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// maxChatsBody bounds the control plane's answer; {"live":n,"reachable":n}
// is a few dozen bytes.
const maxChatsBody = 4 << 10

// HTTPControlPlane asks the control plane over HTTP:
//
//	GET  {URL}/marquees/{id}/chats                 -> {"live": n, "reachable": n}
//	POST {URL}/marquees/{id}/playgrounds/teardown  {"generation": n} -> 2xx
//
// An empty URL means no control plane is configured: Chats then fails, so a
// live host is preserved (M18), and teardown has nobody to tell.
type HTTPControlPlane struct {
	URL    string
	Token  string // optional bearer token; secret
	Client *http.Client
}

// ErrNoControlPlane is every call's answer when no control plane is
// configured (--control-plane-url): chats are unknown, so live hosts are
// preserved (M13), and no playground is torn down.
var ErrNoControlPlane error = &Error{Class: Configuration, Msg: "no control plane configured (--control-plane-url)"}

func (c *HTTPControlPlane) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	return http.DefaultClient
}

func (c *HTTPControlPlane) do(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	if c.URL == "" {
		return nil, ErrNoControlPlane
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, bytes.NewReader(body))
	if err != nil {
		return nil, errorf(Configuration, "control plane request: %v", err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client().Do(req)
	if err != nil {
		return nil, errorf(Transient, "control plane unreachable: %s", redactURLError(err))
	}
	return resp, nil
}

// Chats implements ControlPlane. Anything but a 200 with exactly the two
// non-negative counts is an error: garbage never counts as "no chats".
func (c *HTTPControlPlane) Chats(ctx context.Context, id string) (Chats, error) {
	resp, err := c.do(ctx, http.MethodGet, "/marquees/"+url.PathEscape(id)+"/chats", nil)
	if err != nil {
		return Chats{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxChatsBody+1))
	if err != nil {
		return Chats{}, errorf(Transient, "control plane: read: %v", err)
	}
	if resp.StatusCode != http.StatusOK {
		return Chats{}, errorf(Transient, "control plane answered %d", resp.StatusCode)
	}
	if len(raw) > maxChatsBody {
		return Chats{}, errorf(Transient, "control plane answer over %d bytes", maxChatsBody)
	}
	return DecodeChats(raw)
}

// DecodeChats parses the control plane's answer strictly.
func DecodeChats(raw []byte) (Chats, error) {
	var v struct {
		Live      *int `json:"live"`
		Reachable *int `json:"reachable"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Chats{}, errorf(Transient, "control plane answer is not {\"live\": n, \"reachable\": n}: %v", err)
	}
	if dec.More() {
		return Chats{}, errorf(Transient, "control plane answer has trailing data")
	}
	if v.Live == nil || v.Reachable == nil || *v.Live < 0 || *v.Reachable < 0 {
		return Chats{}, errorf(Transient, "control plane answer lacks non-negative live and reachable counts")
	}
	return Chats{Live: *v.Live, Reachable: *v.Reachable}, nil
}

// TeardownPlaygrounds implements ControlPlane.
func (c *HTTPControlPlane) TeardownPlaygrounds(ctx context.Context, id string, gen uint64) error {
	body := fmt.Appendf(nil, `{"generation":%d}`, gen)
	resp, err := c.do(ctx, http.MethodPost, "/marquees/"+url.PathEscape(id)+"/playgrounds/teardown", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxChatsBody))
	if resp.StatusCode/100 != 2 {
		return errorf(Transient, "control plane teardown answered %d", resp.StatusCode)
	}
	return nil
}
