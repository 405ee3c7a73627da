package tokenizer

import (
	"math/rand/v2"
	"strings"
)

// Generated inputs for the exactness tests. Each category aims at one part of
// the pipeline where an encoder can go wrong: the split regex's alternatives,
// Unicode classes, normalization, and added-token matching.

var (
	words = strings.Fields(`the of and to in is was for on that with as by at it from he she they we you
		be this are or an not his her which but have had one all their there were been has more when will
		would who so no if out into about than them can only other new some what time could these two may
		first then do any like my now over such our man me even most made after also did many before must
		through back years where much your way well down should because each just those people how too
		little state good very make world still own see men work long get here between both life being
		under never day same another know while last might us great old year off come since against go
		came right used take three tokenizer kernel prefix cache router vLLM Kubernetes Terraform GPU`)
	codeLines = []string{
		"func main() {", "\tfmt.Println(\"hello, world\")", "}", "for i := 0; i < n; i++ {",
		"    if (x != null && y >= 0) return x->next;", "def f(a, b=2, *args, **kw):", "\treturn a**b // 3",
		"#include <stdio.h>", "int main(int argc, char **argv) { return 0; }", "const x = `${a}-${b}`;",
		"SELECT id, name FROM users WHERE age > 21;", "<div class=\"row\"><span>&nbsp;</span></div>",
		"x += y << 2 | ~z ^ 0xFF;", "let v: Vec<u8> = vec![1, 2, 3];", "// TODO(llmd): handle EOF\r",
		"    \"key\": [1.5e-3, -2, null, true],", "@decorator\nclass A(B):\n    pass", "$ echo $HOME | grep -v '^#'",
	}
	spaces      = []string{" ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ", "\u00a0", "\u3000", "\u2028", "\u2009", "\v", "\f"}
	apostrophes = []string{"'", "’", "`"}
	suffixes    = []string{"s", "t", "re", "ve", "m", "ll", "d"}
	cjk         = []string{"你好世界", "我们的缓存路由器", "東京は日本の首都です", "ひらがなとカタカナ", "한국어 텍스트입니다", "中文，标点。", "「引用」", "ｆｕｌｌｗｉｄｔｈ１２３", "漢字かな交じり文"}
	emoji       = []string{"😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪", "🇯🇵", "❤️", "1️⃣", "🧑🏿‍💻", "✨", "🤖", "👩‍❤️‍💋‍👨", "☕"}
	marks       = []string{"e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "\u0915\u094d\u0937", "\u0627\u064e\u0644\u0652", "\u05e9\u05c1\u05b8", "z\u0335\u0321\u0322", "\u1100\u1161\u11a8", "A\u030a", "\u212b", "\u1e9b\u0323", "ﬁ", "Å", "ǆ"}
	digitRuns   = []string{"0", "7", "42", "123", "1234", "12345678901234", "3.14159", "1,000,000", "٣٤٥", "١٢٣٤", "１２３", "Ⅻ", "½", "²³", "०१२"}
	specialToks = []string{"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>", "<｜begin▁of▁sentence｜>", "<｜User｜>", "<|im_", "<|", "|>", "<think", "<|reserved_special_token_5|>"}
)

// generator builds one kind of text from a random source.
type generator struct {
	name string
	gen  func(r *rand.Rand) string
}

func pick(r *rand.Rand, xs []string) string { return xs[r.IntN(len(xs))] }

func prose(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		w := pick(r, words)
		switch r.IntN(8) {
		case 0:
			w = strings.ToUpper(w[:1]) + w[1:]
		case 1:
			w = strings.ToUpper(w)
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		switch r.IntN(10) {
		case 0:
			b.WriteString(",")
		case 1:
			b.WriteString(".")
		case 2:
			b.WriteString("?!")
		}
	}
	return b.String()
}

var generators = []generator{
	{"prose", func(r *rand.Rand) string { return prose(r, 1+r.IntN(60)) }},
	{"code", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(8); n > 0; n-- {
			b.WriteString(strings.Repeat(pick(r, []string{"", "\t", "    ", "  "}), r.IntN(3)))
			b.WriteString(pick(r, codeLines))
			b.WriteString(pick(r, []string{"\n", "\n\n", "\r\n", "\n    "}))
		}
		return b.String()
	}},
	{"whitespace", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(12); n > 0; n-- {
			for k := r.IntN(6); k > 0; k-- {
				b.WriteString(pick(r, spaces))
			}
			if r.IntN(4) == 0 {
				b.WriteString(strings.Repeat(pick(r, spaces), r.IntN(40)))
			}
			switch r.IntN(4) {
			case 0:
				b.WriteString(pick(r, words))
			case 1:
				b.WriteString(pick(r, digitRuns))
			case 2:
				b.WriteString(pick(r, []string{"!", "...", "--", "#", "(", "}"}))
			}
		}
		return b.String()
	}},
	{"digits", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(10); n > 0; n-- {
			b.WriteString(pick(r, digitRuns))
			if r.IntN(2) == 0 {
				for k := r.IntN(20); k > 0; k-- {
					b.WriteByte(byte('0' + r.IntN(10)))
				}
			}
			b.WriteString(pick(r, []string{" ", "", "-", ".", "x", " + ", "\n", "abc", "%"}))
		}
		return b.String()
	}},
	{"contractions", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(10); n > 0; n-- {
			w := pick(r, words)
			suf := pick(r, suffixes)
			var cased strings.Builder
			for _, c := range suf {
				if r.IntN(2) == 0 {
					c -= 'a' - 'A'
				}
				cased.WriteRune(c)
			}
			b.WriteString(w + pick(r, apostrophes) + cased.String())
			b.WriteString(pick(r, []string{" ", "", "x", "ing ", "1", ".", "\n", "'"}))
		}
		return b.String()
	}},
	{"cjk", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(8); n > 0; n-- {
			b.WriteString(pick(r, cjk))
			if r.IntN(3) == 0 {
				b.WriteString(" " + pick(r, words) + " ")
			}
		}
		return b.String()
	}},
	{"emoji", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(10); n > 0; n-- {
			b.WriteString(pick(r, emoji))
			b.WriteString(pick(r, []string{"", " ", "\u200d", "\ufe0f", " ok ", "!", "\n"}))
		}
		return b.String()
	}},
	{"combining", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(10); n > 0; n-- {
			b.WriteString(pick(r, marks))
			if r.IntN(2) == 0 {
				b.WriteString(pick(r, words))
			}
			b.WriteString(pick(r, []string{"", " ", "\u0301", "\u0327\u0301", "\n"}))
		}
		return b.String()
	}},
	{"non-nfc", func(r *rand.Rand) string {
		// Decomposed Latin and Hangul, and marks in non-canonical order.
		var b strings.Builder
		for n := 1 + r.IntN(12); n > 0; n-- {
			switch r.IntN(4) {
			case 0:
				b.WriteString(string(rune('a'+r.IntN(26))) + string(rune(0x300+r.IntN(0x70))))
			case 1:
				b.WriteString(string(rune(0x1100+r.IntN(19))) + string(rune(0x1161+r.IntN(21))) + string(rune(0x11a8+r.IntN(27))))
			case 2:
				b.WriteString("o\u0323\u0302 q\u0307\u0323 " + pick(r, words))
			default:
				b.WriteString(pick(r, []string{"\u2126", "\u00c5", "\u212b", "\u0344", "\u0958", "\uf900", " "}))
			}
		}
		return b.String()
	}},
	{"special", func(r *rand.Rand) string {
		var b strings.Builder
		for n := 1 + r.IntN(8); n > 0; n-- {
			if r.IntN(2) == 0 {
				b.WriteString(pick(r, specialToks))
			}
			b.WriteString(pick(r, []string{"", " ", "\n", "system\n", "user", " hello ", "  "}))
			if r.IntN(2) == 0 {
				b.WriteString(prose(r, 1+r.IntN(6)))
			}
		}
		return b.String()
	}},
	{"mixed", func(r *rand.Rand) string {
		// Random code points from every plane in use, plus all of the above.
		var b strings.Builder
		for n := 1 + r.IntN(20); n > 0; n-- {
			switch r.IntN(6) {
			case 0:
				c := rune(r.IntN(0x3000))
				if c < 0x20 && c != '\n' && c != '\t' {
					c = ' '
				}
				b.WriteRune(c)
			case 1:
				b.WriteRune(rune(0x1F000 + r.IntN(0x1000)))
			case 2:
				b.WriteRune(rune(0x3000 + r.IntN(0xA000)))
			case 3:
				b.WriteString(pick(r, apostrophes) + pick(r, suffixes))
			case 4:
				b.WriteString(pick(r, spaces))
			default:
				b.WriteString(pick(r, [][]string{words, emoji, cjk, marks, digitRuns, specialToks}[r.IntN(6)]))
			}
		}
		return b.String()
	}},
}

// generatedTexts returns perKind texts of every category, the same on every run.
func generatedTexts(perKind int) []string {
	r := rand.New(rand.NewPCG(4, 2026))
	var out []string
	for _, g := range generators {
		for i := 0; i < perKind; i++ {
			out = append(out, g.gen(r))
		}
	}
	return out
}
