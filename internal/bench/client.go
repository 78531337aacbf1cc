package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// NewClient returns an HTTP client for conc requests at once: one HTTP/1.1 connection each,
// all kept open between requests, no compression, no proxy, and no overall timeout (streams
// last as long as they last; Config.Timeout bounds each request).
func NewClient(conc int) *http.Client {
	var http1 http.Protocols
	http1.SetHTTP1(true)
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conc,
		MaxIdleConnsPerHost: conc,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
		DisableCompression:  true,
		// HTTP/1.1 only: one connection per request in flight, as most buyers' clients.
		Protocols: &http1,
	}}
}

// NewH2CClient returns an HTTP client that speaks HTTP/2 without TLS (prior knowledge), as
// clients behind an HTTP/2 proxy do: requests share connections, up to the server's
// concurrent streams each.
func NewH2CClient() *http.Client {
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		DialContext:        (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout:    90 * time.Second,
		DisableCompression: true,
		Protocols:          &h2c,
		HTTP2:              &http.HTTP2Config{StrictMaxConcurrentRequests: false},
	}}
}

// BaseURL normalizes an API address to its base URL ending in /v1: http://host:8080,
// http://host:8080/ and http://host:8080/v1/ all give http://host:8080/v1, as OPENAI_BASE_URL
// has it.
func BaseURL(s string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL such as http://127.0.0.1:8080/v1", s)
	}
	u.Path = strings.TrimSuffix(strings.TrimRight(u.Path, "/"), "/v1") + "/v1"
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String(), nil
}

// FirstModel returns the first model GET /models lists.
func FirstModel(ctx context.Context, client *http.Client, baseURL, key string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/models", nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("list models: %w", httpError(resp.StatusCode, body))
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", fmt.Errorf("list models: %w", err)
	}
	if len(list.Data) == 0 {
		return "", errors.New("list models: the network serves no model yet")
	}
	return list.Data[0].ID, nil
}

// Error makes an error group an error.
func (g *ErrorGroup) Error() string {
	if g.Code == "" {
		return fmt.Sprintf("%d: %s", g.Status, g.Message)
	}
	return fmt.Sprintf("%d %s: %s", g.Status, g.Code, g.Message)
}
