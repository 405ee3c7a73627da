// Package chattest gives tests the real Qwen3 chat model (tokenizer and
// template from the model's own files, prepared by internal/testenv),
// loaded once per test process, as net/http/httptest gives them servers.
package chattest

import (
	"sync"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
)

var (
	qwenOnce  sync.Once
	qwenModel *chat.Model
	qwenErr   error
)

// Qwen3 is the Qwen3 chat model, loaded on the first call of the process;
// it fails t when the files cannot be prepared or loaded.
func Qwen3(t testing.TB) *chat.Model {
	t.Helper()
	files := testenv.Tokenizer(t, "qwen3")
	qwenOnce.Do(func() {
		qwenModel, qwenErr = chat.LoadModel(files.TokenizerJSON, files.TokenizerConfig, chat.Options{})
	})
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenModel
}
