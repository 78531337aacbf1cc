package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/shareai/shareai/internal/api"
	"github.com/shareai/shareai/internal/fleet"
)

func modelOf(mi fleet.ModelInfo) api.Model {
	return api.Model{
		ID: mi.ID, Object: "model", Created: mi.Since.Unix(), OwnedBy: "shareai",
		Nodes: mi.Nodes, ContextLength: mi.ContextLength, Simulated: mi.Simulated,
	}
}

func (g *Gateway) listModels(w http.ResponseWriter, r *http.Request, c *call) error {
	list := api.ModelList{Object: "list", Data: []api.Model{}}
	for _, mi := range g.cfg.Fleet.Models() {
		list.Data = append(list.Data, modelOf(mi))
	}
	return writeJSON(w, list)
}

func (g *Gateway) getModel(w http.ResponseWriter, r *http.Request, c *call) error {
	id := r.PathValue("id")
	for _, mi := range g.cfg.Fleet.Models() {
		if mi.ID == id {
			return writeJSON(w, modelOf(mi))
		}
	}
	return &api.Error{Status: http.StatusNotFound, Type: api.TypeInvalidRequest, Param: "model", Code: api.CodeModelNotFound,
		Message: fmt.Sprintf("The model '%s' does not exist or no node serves it now.", id)}
}

func writeJSON(w http.ResponseWriter, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
	return nil
}
