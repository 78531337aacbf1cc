package mesh

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/shareai/shareai/internal/fleet"
	"github.com/shareai/shareai/internal/protocol"
)

// The shared view: each owner publishes its nodes, every replica lists the others'.

// nodeRecord is a node as its owner publishes it.
type nodeRecord struct {
	Owner     string            `json:"owner"`
	ID        string            `json:"id"`
	Account   string            `json:"account"`
	Name      string            `json:"name,omitempty"`
	Region    string            `json:"region,omitempty"`
	Key       []byte            `json:"key"`
	Level     string            `json:"level"`
	Score     float64           `json:"score,omitempty"`
	RTT       time.Duration     `json:"rtt,omitempty"`
	Paused    string            `json:"paused,omitempty"`
	Connected time.Time         `json:"connected"`
	Windows   string            `json:"windows,omitempty"`
	Timezone  string            `json:"timezone,omitempty"`
	Hardware  protocol.Hardware `json:"hardware"`
	Offers    []offerRecord     `json:"offers"`
	At        time.Time         `json:"at"` // when the owner published it
}

type offerRecord struct {
	Offer   protocol.Offer `json:"offer"`
	Level   string         `json:"level"`
	Running int            `json:"running"`
	Cold    bool           `json:"cold,omitempty"`
	Stats   fleet.Stats    `json:"stats"`
}

func nodeKey(id string) string { return "node." + id }

// publish puts every node this replica holds in the bucket, and takes out those it no longer
// holds.
func (m *Mesh) publish(ctx context.Context, published map[string]bool) {
	now := time.Now()
	held := map[string]bool{}
	for _, n := range m.cfg.Fleet.Local() {
		if n.Selftest || n.Gone() {
			continue
		}
		held[n.ID] = true
		rec := nodeRecord{Owner: m.cfg.Replica, ID: n.ID, Account: n.AccountID, Name: n.Name, Region: n.Region,
			Key: n.Key(), Level: n.Level(), Score: n.Score(), RTT: n.RTT(), Paused: n.Paused(), Connected: n.Connected,
			Windows: n.Windows, Timezone: n.Timezone, Hardware: n.Hardware, At: now}
		for _, o := range n.Offers {
			rec.Offers = append(rec.Offers, offerRecord{Offer: o.Published(), Level: o.OwnLevel(), Running: o.Running(), Cold: !o.Warm(), Stats: o.Stats()})
		}
		b, err := json.Marshal(rec)
		if err != nil {
			continue
		}
		pctx, cancel := context.WithTimeout(ctx, requestWait)
		_, err = m.bucket().Put(pctx, nodeKey(n.ID), b)
		cancel()
		if err != nil {
			m.log.Warn("mesh: publish a node", "node", n.ID, "err", err)
			continue
		}
		published[n.ID] = true
	}
	for id := range published {
		if !held[id] {
			m.withdraw(ctx, id)
			delete(published, id)
		}
	}
}

// withdraw takes a node out of the bucket, if this replica is still its owner there: one that
// connected to another replica since belongs to that one.
func (m *Mesh) withdraw(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(ctx, requestWait)
	defer cancel()
	e, err := m.bucket().Get(ctx, nodeKey(id))
	if err != nil {
		return
	}
	var rec nodeRecord
	if json.Unmarshal(e.Value(), &rec) != nil || rec.Owner != m.cfg.Replica {
		return
	}
	m.bucket().Delete(ctx, nodeKey(id), jetstream.LastRevision(e.Revision()))
}

// onEntry takes a change of the bucket into the fleet's view.
func (m *Mesh) onEntry(e jetstream.KeyValueEntry) {
	if e == nil {
		return // the initial values are in
	}
	id, ok := strings.CutPrefix(e.Key(), "node.")
	if !ok {
		return
	}
	switch e.Operation() {
	case jetstream.KeyValueDelete, jetstream.KeyValuePurge:
		if n := m.cfg.Fleet.Node(id); n != nil && n.Owner() != "" {
			m.cfg.Fleet.DropRemote(id, n.Owner())
		}
		return
	}
	var rec nodeRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil || rec.Owner == "" || rec.Owner == m.cfg.Replica || rec.ID != id {
		return
	}
	if time.Since(rec.At) > staleAfter {
		return // a dead owner's last word
	}
	r := fleet.RemoteNode{ID: rec.ID, AccountID: rec.Account, Name: rec.Name, Region: rec.Region, Owner: rec.Owner, Key: rec.Key,
		Level: rec.Level, Score: rec.Score, RTT: rec.RTT, Paused: rec.Paused, Connected: rec.Connected,
		Windows: rec.Windows, Timezone: rec.Timezone, Hardware: rec.Hardware}
	for _, o := range rec.Offers {
		r.Offers = append(r.Offers, fleet.RemoteOffer{Offer: o.Offer, Level: o.Level, Running: o.Running, Cold: o.Cold, Stats: o.Stats})
	}
	m.cfg.Fleet.PutRemote(r)
}
