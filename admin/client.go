package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client reads a running serve's admin listener: the JSON of /healthz and
// /api/..., with the bearer token when the listener requires one.
type Client struct {
	base, token string
	hc          *http.Client
}

// NewClient is a client of the admin listener at addr (HOST:PORT); token
// "" sends none. Every request is bounded to 10 s.
func NewClient(addr, token string) *Client {
	return &Client{base: "http://" + addr, token: token, hc: &http.Client{Timeout: 10 * time.Second}}
}

// UnreachableError is a request that got no answer: no serve listens
// there, or the connection failed.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return "reaching serve's admin listener: " + e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

// Get decodes the JSON answer to GET path into v. An answer other than
// 200 is an error naming the path, the status and the start of the body.
func (c *Client) Get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return &UnreachableError{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
