package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/shareai/shareai/internal/engine"
	"github.com/shareai/shareai/internal/protocol"
)

// offers returns the node's offers: the engine's models, or those Config.Offers names, with the
// provider's settings. An offer the provider named of a model the engine does not serve, or
// that does not fit the GPUs' memory, is a fatal error: the provider must change the
// configuration. Of the engine's models offered by default, those that do not fit are left
// out with a warning, unless none fits. A node offers at most protocol.MaxOffers models: of
// more named, it refuses to start; of more served, it offers the first ones, with a warning.
func (a *Agent) offers(ctx context.Context) ([]protocol.Offer, error) {
	models, err := a.cfg.Engine.Models(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the engine's models: %w", err)
	}
	if len(models) == 0 {
		return nil, errors.New("the engine serves no model")
	}
	want, named := a.cfg.Offers, len(a.cfg.Offers) > 0
	if len(want) > protocol.MaxOffers {
		return nil, fmt.Errorf("%w: %d models to offer; a node offers at most %d", errFatal, len(want), protocol.MaxOffers)
	}
	if !named {
		for _, m := range models {
			want = append(want, protocol.Offer{Model: m.Name, InputPrice: int64(a.cfg.InputPrice), OutputPrice: int64(a.cfg.OutputPrice),
				AskSchedule: a.cfg.AskSchedule})
		}
	}
	var (
		offers  []protocol.Offer
		missing []string
		errs    []error
	)
	for _, o := range want {
		i := slices.IndexFunc(models, func(m engine.Model) bool { return m.Name == o.Model })
		if i < 0 {
			missing = append(missing, o.Model)
			continue
		}
		m := models[i]
		o.ContextLength = cmp.Or(o.ContextLength, m.ContextLength, a.cfg.ContextLength)
		o.MaxConcurrent = cmp.Or(o.MaxConcurrent, a.cfg.MaxConcurrent)
		o.Quantization = cmp.Or(o.Quantization, m.Quantization, a.cfg.Quantization)
		o.Continues = m.Continues
		o.GoldSlots = goldSlots(a.cfg.GoldShare, o.MaxConcurrent)
		o.NoBronze = a.cfg.NoBronze
		o.NoBatch = a.cfg.NoBatch
		if a.cfg.CheckFit != nil {
			if err := a.cfg.CheckFit(m, o.ContextLength); err != nil {
				errs = append(errs, err)
				if !named {
					a.log.Warn("not offering a model that does not fit the GPUs", logModel, m.Name, "err", err)
				}
				continue
			}
		}
		offers = append(offers, o)
	}
	if len(missing) > 0 {
		names := make([]string, len(models))
		for i, m := range models {
			names[i] = m.Name
		}
		errs = append(errs, fmt.Errorf("the engine does not serve %s; it serves %s", strings.Join(missing, ", "), strings.Join(names, ", ")))
	}
	if len(errs) > 0 && (named || len(offers) == 0) {
		return nil, fmt.Errorf("%w: %w", errFatal, errors.Join(errs...))
	}
	if len(offers) > protocol.MaxOffers {
		a.log.Warn("the engine serves more models than a node may offer: offering the first ones (name those to offer with --models)",
			"models", len(offers), "offered", protocol.MaxOffers)
		offers = offers[:protocol.MaxOffers]
	}
	return offers, nil
}

// goldSlots is the share of slots kept for gold, rounded to the nearest slot.
func goldSlots(share float64, slots int) int {
	return min(int(math.Round(share*float64(slots))), slots)
}
