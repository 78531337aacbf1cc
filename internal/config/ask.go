package config

import (
	"fmt"

	"github.com/shareai/shareai/internal/money"
	"github.com/shareai/shareai/internal/pricing"
	"github.com/shareai/shareai/internal/protocol"
)

// Price is the file's price setting, node-wide or of an offer: the flat ask (USD per 1M
// tokens) and an ask schedule of time windows, each with asks of its own, such as
//
//	price:
//	  input: 0.05
//	  output: 0.10
//	  timezone: Europe/Berlin   # default: availability.timezone, else the machine's
//	  windows:                  # the first window open at a time holds; outside all, the flat ask
//	    - {name: peak, when: "mon-fri 09:00-18:00", input: 0.08, output: 0.16}
//	    - {name: night, when: "daily 00:00-06:00", output: 0.06}
type Price struct {
	Input    string      `yaml:"input"`
	Output   string      `yaml:"output"`
	Timezone string      `yaml:"timezone"`
	Windows  []AskWindow `yaml:"windows"`
}

// AskWindow is a window of an ask schedule: its name (what reports call the ask), when it is
// open (weekly windows as availability.windows writes them) and its asks, USD per 1M tokens;
// an ask it does not set is the flat one.
type AskWindow struct {
	Name   string `yaml:"name"`
	When   string `yaml:"when"`
	Input  string `yaml:"input"`
	Output string `yaml:"output"`
}

// AskSchedule returns the ask schedule of the node (the file's price.windows), for offers
// without one of their own, asked at the flat ask in, out outside its windows; nil when it has
// no windows.
func (p *Provider) AskSchedule(in, out money.Price) (*protocol.AskSchedule, error) {
	return p.askSchedule("price", p.Price.Timezone, p.Price.Windows, in, out)
}

// OfferAskSchedule returns an offer's ask schedule: its own windows, in its own time zone or
// the node's; or else the node's (AskSchedule) at the offer's flat ask in, out.
func (p *Provider) OfferAskSchedule(i int, in, out money.Price) (*protocol.AskSchedule, error) {
	o := &p.Offers[i]
	if len(o.Price.Windows) == 0 {
		return p.AskSchedule(in, out)
	}
	zone := o.Price.Timezone
	if zone == "" {
		zone = p.Price.Timezone
	}
	return p.askSchedule(fmt.Sprintf("offers[%d].price", i), zone, o.Price.Windows, in, out)
}

// askSchedule makes the protocol's schedule of the file's windows under key, checking it as
// the coordinator will. A window's ask it does not set is the flat one.
func (p *Provider) askSchedule(key, zone string, windows []AskWindow, in, out money.Price) (*protocol.AskSchedule, error) {
	if len(windows) == 0 {
		return nil, nil
	}
	if zone == "" {
		loc, err := p.Availability.Location()
		if err != nil {
			return nil, err
		}
		if zone = loc.String(); zone == "Local" {
			return nil, &FieldError{key + ".timezone", "required: the machine does not name its time zone; set an IANA zone such as Europe/Berlin"}
		}
	}
	s := &protocol.AskSchedule{Timezone: zone}
	for i, w := range windows {
		field := func(name string) string { return fmt.Sprintf("%s.windows[%d].%s", key, i, name) }
		win := protocol.AskWindow{Name: w.Name, When: w.When, InputPrice: int64(in), OutputPrice: int64(out)}
		for _, a := range []struct {
			name, value string
			into        *int64
		}{{"input", w.Input, &win.InputPrice}, {"output", w.Output, &win.OutputPrice}} {
			if a.value == "" {
				continue
			}
			price, err := money.ParsePrice(a.value)
			if err != nil {
				return nil, &FieldError{field(a.name), err.Error()}
			}
			*a.into = int64(price)
		}
		if w.When == "" {
			return nil, &FieldError{field("when"), `required: weekly windows such as "mon-fri 09:00-18:00"`}
		}
		s.Windows = append(s.Windows, win)
	}
	if _, err := pricing.Compile(s); err != nil {
		return nil, &FieldError{key + ".windows", err.Error()}
	}
	return s, nil
}
