"""Writes the tiny model the real-engine tests serve, deterministically.

A Qwen3 causal LM with seeded random weights (4 layers, hidden 256, 4 query
heads and 2 KV heads of 64, the Qwen vocabulary of 151,936 ids, tied
embeddings, bf16) saved beside the real Qwen3 tokenizer files and chat
template. The weights make no sense; what the tests check is how vLLM
schedules, caches, tokenizes and reports, which this architecture exercises
as Qwen2.5-7B does (grouped-query attention, the same tokenizer).

usage: tiny_model.py OUT_DIR TOKENIZER_JSON TOKENIZER_CONFIG_JSON
"""

import os
import shutil
import sys

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

SEED = 20261203


def main(out, tokenizer_json, tokenizer_config):
    torch.manual_seed(SEED)
    config = Qwen3Config(
        vocab_size=151936,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=64,
        max_position_embeddings=40960,
        tie_word_embeddings=True,
        bos_token_id=151643,
        eos_token_id=151645,
        dtype="bfloat16",
    )
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    os.makedirs(out, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    shutil.copyfile(tokenizer_json, os.path.join(out, "tokenizer.json"))
    shutil.copyfile(tokenizer_config, os.path.join(out, "tokenizer_config.json"))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
