"""Build the CPU tier's tiny Llama model and tokenizer offline (run with the repro environment's python).

Why a tiny random model: the CPU tier must run every preset on a laptop or CI runner with no model hub.
Random weights are fine for KV-cache experiments — what matters is the KV layout and that the model is
sensitive to its KV (it is), and random models loop greedily, so speculation accepts a lot (a clean
baseline). Recipe from cpu-repro.md §2: ByteLevel BPE (vocab 2048) trained on generated pseudo-words,
Llama with hidden 256, 2 layers, 4 heads, 2 KV heads, head_dim 64 (a CPU attention head size).

Usage: ``python -m specdiag.repro.tinymodel --out DIR`` (idempotent: a finished DIR is left alone).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

MODEL_VERSION = "tiny-llama-v1"
DONE_MARKER = ".specdiag-tinymodel-done"


def build(out: Path, seed: int = 1234) -> Path:
    if (out / DONE_MARKER).exists():
        return out
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from specdiag.repro.workload import text

    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    for i in range(400):  # ~20k lines of 12 pseudo-words, same generator as the workload prompts
        lines.extend(text(10_000 + i, 600).splitlines())
    (out / "sample.txt").write_text("\n".join(lines[:2000]) + "\n")

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=2048, special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(lines, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                       special_tokens=[("<s>", tok.token_to_id("<s>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>", model_max_length=4096)
    fast.chat_template = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                          "{% if add_generation_prompt %}assistant: {% endif %}")
    fast.save_pretrained(out)

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=4096,
                      bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                      pad_token_id=fast.pad_token_id, torch_dtype="bfloat16", tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.save_pretrained(out)
    (out / DONE_MARKER).write_text(json.dumps({"version": MODEL_VERSION, "seed": seed}))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args(argv)
    print(build(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
