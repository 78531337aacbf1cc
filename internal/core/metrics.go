package core

import (
	"errors"
	"net/http"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/metrics"
	"github.com/shareai/shareai/internal/store"
)

// RequestMetrics is what the metrics record of an ended request of an endpoint: by its usage
// record (Outcome.Usage; nil when none was made) once a node took it, else by why it was
// refused (err). Every caller that serves buyers (the API, the playground) records it.
func RequestMetrics(endpoint string, u *store.Usage, err error) metrics.Request {
	m := metrics.Request{Endpoint: endpoint, Outcome: refusedOutcome(err)}
	if u == nil || u.Outcome == "" || u.NodeID == "" {
		return m // no node took it: the model may be anything the buyer typed, so it is no label
	}
	m.Model, m.Outcome, m.Served = u.Model, u.Outcome, true
	m.Duration, m.TTFT = u.Duration.Seconds(), u.TTFT.Seconds()
	m.PromptTokens, m.Complete = u.PromptTokens, u.CompletionTokens
	return m
}

// refusedOutcome names why a request no node served was refused.
func refusedOutcome(err error) string {
	ae, ok := errors.AsType[*api.Error](err)
	switch {
	case err == nil:
		return store.OutcomeOK
	case !ok:
		return store.OutcomeError
	case ae.Code == api.CodeNoProviderAvailable:
		return "no_provider"
	case ae.Status == http.StatusUnauthorized:
		return "unauthorized"
	case ae.Status == http.StatusPaymentRequired:
		return "payment_required"
	case ae.Status == http.StatusNotFound:
		return "not_found"
	case ae.Status == http.StatusTooManyRequests:
		return "rate_limited"
	case ae == ErrBuyerGone:
		return store.OutcomeCancelled
	case ae.Status < 500:
		return "invalid"
	}
	return store.OutcomeError
}
