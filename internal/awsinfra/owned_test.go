package awsinfra

import (
	"context"
	"testing"
)

// countOwned counts the live parts carrying the owner tag, logging each.
func countOwned(t *testing.T, c *Clients, owner string) int {
	t.Helper()
	parts, err := c.FindOwnedParts(context.Background(), owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		t.Logf("owned by %s: %s %s", owner, p.Kind, p.ID)
	}
	return len(parts)
}
