package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// EngineBody is body as the engine should get it: with Config.EnginePriority
// on, its vLLM "priority" is set to the request's class rank (0 for the
// highest class, lower runs sooner), whatever the client sent, so the
// engines' priority scheduling orders and preempts by the router's classes;
// off, body unchanged. The proxy front and the endpoint picker both call it
// after the decision.
func (s *Server) EngineBody(body []byte, flow Flow) ([]byte, error) {
	if !s.cfg.EnginePriority {
		return body, nil
	}
	return withPriority(body, flow.Class)
}

// priorityKey is vLLM's request field (ChatCompletionRequest.priority,
// CompletionRequest.priority).
const priorityKey = "priority"

// withPriority returns a copy of the JSON object body with its top-level
// priority member set to p. Every existing priority member gets the value
// (Python's json keeps the last of duplicate keys, so replacing only the
// first would let a client's later one win); without one, the member is
// added first. Nothing else in the body changes.
func withPriority(body []byte, p int) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("the request body must be a JSON object")
	}
	open := int(dec.InputOffset()) // just past '{'
	var spans [][2]int             // the existing priority values
	members := 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the request body is not valid JSON: %w", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("the request body is not valid JSON: %w", err)
		}
		members++
		if t == priorityKey {
			end := int(dec.InputOffset())
			spans = append(spans, [2]int{end - len(v), end})
		}
	}
	value := strconv.Itoa(p)
	out := make([]byte, 0, len(body)+len(priorityKey)+len(value)+4)
	if len(spans) == 0 {
		out = append(out, body[:open]...)
		out = append(out, `"`+priorityKey+`":`+value...)
		if members > 0 {
			out = append(out, ',')
		}
		return append(out, body[open:]...), nil
	}
	last := 0
	for _, sp := range spans {
		out = append(out, body[last:sp[0]]...)
		out = append(out, value...)
		last = sp[1]
	}
	return append(out, body[last:]...), nil
}
