package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestLoadWithConfig checks the post-processor transformers builds from
// tokenizer_config.json: DeepSeek V3 (LlamaTokenizerFast, add_bos_token true)
// gains <｜begin▁of▁sentence｜> when special tokens are added; Qwen3
// (Qwen2Tokenizer) and Llama 3 (PreTrainedTokenizerFast) keep their
// tokenizer.json behaviour. The JS reference does not implement this rule,
// so the expectations come from the config files themselves.
func TestLoadWithConfig(t *testing.T) {
	for _, fam := range []string{"deepseek_v3", "qwen3", "llama3"} {
		mf := testenv.Tokenizer(t, fam)
		plain, err := Load(mf.TokenizerJSON)
		if err != nil {
			t.Fatal(err)
		}
		withCfg, err := LoadWithConfig(mf.TokenizerJSON, mf.TokenizerConfig)
		if err != nil {
			t.Fatalf("%s: %v", fam, err)
		}
		base, _ := plain.Encode("Hello world", true)
		got, _ := withCfg.Encode("Hello world", true)
		noSpecial, _ := withCfg.Encode("Hello world", false)
		want := base
		if fam == "deepseek_v3" {
			bos, _ := withCfg.TokenToID("<｜begin▁of▁sentence｜>")
			want = append([]uint32{bos}, base...)
		}
		if !slices.Equal(got, want) || !slices.Equal(noSpecial, base) {
			t.Errorf("%s: with config %v (without special %v), want %v", fam, got, noSpecial, want)
		}
	}
}

// TestConfigEOSAndErrors: add_eos_token appends the EOS token; a missing or
// unknown BOS token is a load error, as in transformers.
func TestConfigEOSAndErrors(t *testing.T) {
	mf := testenv.Tokenizer(t, "deepseek_v3")
	dir := t.TempDir()
	cases := map[string]string{
		"eos":     `{"tokenizer_class":"LlamaTokenizerFast","add_bos_token":false,"add_eos_token":true,"eos_token":"<｜end▁of▁sentence｜>"}`,
		"nobos":   `{"tokenizer_class":"LlamaTokenizerFast","bos_token":null}`,
		"unknown": `{"tokenizer_class":"LlamaTokenizer","bos_token":{"content":"<nope>"}}`,
	}
	for name, cfg := range cases {
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		tk, err := LoadWithConfig(mf.TokenizerJSON, path)
		if name != "eos" {
			if err == nil || !strings.Contains(err.Error(), "bos_token") {
				t.Errorf("%s: got error %v, want one naming bos_token", name, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		ids, _ := tk.Encode("Hi", true)
		if eos, _ := tk.TokenToID("<｜end▁of▁sentence｜>"); len(ids) < 2 || ids[len(ids)-1] != eos || ids[0] == 0 {
			t.Errorf("add_eos_token: %v, want no BOS and EOS %d last", ids, eos)
		}
	}
}
