"""Write a tiny random-weight Qwen2-shaped chat model and a LoRA adapter for it; no download.

Usage (with the engine venv's Python, which has torch, transformers, tokenizers and peft):

    .venv-vllm/bin/python scripts/build_tiny_model.py .tiny-model

writes `.tiny-model/model` (config, fp32 safetensors, a byte-level BPE tokenizer trained on a generated
corpus, a Hermes-style chat template with tools), `.tiny-model/ft` (a PEFT LoRA adapter, r=8, on
q_proj/v_proj, random A and B so it changes outputs) and `.tiny-model/prefill` (the same tokenizer and
template on a larger random model whose prefill costs what session affinity saves: PREFILL below).
Everything is deterministic from SEED. The shape
follows ../shared/reference/vllm-cpu.md §2: head_dim 32 (vLLM's CPU attention needs 32/64/…), 2 layers,
hidden 128, tool/think tags added as ordinary tokens so the hermes parser sees them after detokenization.
A `.done` stamp is written last (`.tiny-model/.done` for the model and adapter, `.tiny-model/prefill/.done`
for the prefill model); an existing complete build is left alone.

The prefill model (`PREFILL`): hidden 256, 4 layers, 4 heads / 2 KV heads (head_dim 64), intermediate 768,
3.7 M parameters (15 MB fp32), 8,192 positions. Sized so that on one core of the 2-core dev box a 2,000-token
prompt's prefill takes 0.2-1 s in vLLM (measured: topologies/vllm_cpu_prefill.yaml), while a replica stays
under 2.5 GB: its KV costs 4 KiB a token (4 layers x K,V x 2 heads x 64 x 4 bytes).
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

SEED = 1234
VOCAB_TARGET = 2048
MODEL_VOCAB = VOCAB_TARGET + 64  # headroom above the trained tokenizer for added tokens
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
ADDED = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>"]
WORDS_TEXT = ("the of and to in is you that it was for on are as with they at be this have from or one had by "
         "word but not what all were we when your can said there use an each which do how their if will up "
         "other about out many then them these so some would make like into time has look two more write go "
         "see number no way could people than first water been call who now find long down day did get come "
         "made may part weather city paris rome london tokyo search query result answer question tool "
         "function name arguments json true false null model system user assistant hello world please "
         "thanks temperature forecast sunny rainy cloudy celsius code python print boxed")
WORDS = WORDS_TEXT.split()
SYMBOLS = list('{}[]":,.!?;()<>/-_=+*#@$%&0123456789\n ')

# tiny_chat_template.jinja, Qwen/Hermes shape: tools listed in the system turn, calls as <tool_call>{json}</tool_call>,
# tool results folded into a user turn as <tool_response> blocks.
CHAT_TEMPLATE = Path(__file__).with_name("tiny_chat_template.jinja")



def corpus(rng: random.Random, lines: int = 4000) -> Iterator[str]:
    """Sentences, JSON fragments and symbols, so the BPE learns what chat and tool calls look like."""
    for _ in range(lines):
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20)))
        if rng.random() < 0.3:
            line += " " + json.dumps({rng.choice(WORDS): rng.choice(WORDS),
                                      "arguments": {rng.choice(WORDS): rng.randint(0, 999)}})
        if rng.random() < 0.2:
            line += "".join(rng.choice(SYMBOLS) for _ in range(rng.randint(1, 8)))
        yield line.capitalize() + rng.choice([".", "?", "!", "\n"])


def build_tokenizer(model_dir: Path, rng: random.Random):  # type: ignore[no-untyped-def]
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_TARGET, min_frequency=2, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(rng), trainer=trainer)
    tok.add_tokens(ADDED)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None, model_max_length=4096,
                                   clean_up_tokenization_spaces=False)
    fast.chat_template = CHAT_TEMPLATE.read_text()
    fast.save_pretrained(str(model_dir))
    return fast


def build(out: Path) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    model_dir, lora_dir = out / "model", out / "ft"
    tokenizer = build_tokenizer(model_dir, rng)
    if len(tokenizer) > MODEL_VOCAB:
        raise SystemExit(f"tokenizer has {len(tokenizer)} tokens, more than the model's {MODEL_VOCAB}")
    ids = {name: tokenizer.convert_tokens_to_ids(name) for name in ("<|endoftext|>", "<|im_end|>")}
    config = Qwen2Config(vocab_size=MODEL_VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                         rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                         bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                         pad_token_id=ids["<|endoftext|>"], torch_dtype="float32")
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(str(model_dir), safe_serialization=True)
    GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=[config.eos_token_id, config.pad_token_id],
                     pad_token_id=config.pad_token_id).save_pretrained(str(model_dir))
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules=["q_proj", "v_proj"],
                      task_type="CAUSAL_LM", init_lora_weights=False)
    peft_model = get_peft_model(Qwen2ForCausalLM.from_pretrained(str(model_dir)), lora)
    peft_model.save_pretrained(str(lora_dir), safe_serialization=True)


PREFILL = dict(hidden_size=256, intermediate_size=768, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=8192)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")


def build_prefill(model_dir: Path, out: Path) -> None:
    """The prefill-sized model beside the tiny one: its tokenizer and template, PREFILL's shape, random weights."""
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(SEED + 1)
    tiny = Qwen2Config.from_pretrained(str(model_dir))
    config = Qwen2Config(vocab_size=tiny.vocab_size, rope_theta=10000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                         bos_token_id=tiny.bos_token_id, eos_token_id=tiny.eos_token_id,
                         pad_token_id=tiny.pad_token_id, torch_dtype="float32", **PREFILL)
    Qwen2ForCausalLM(config).save_pretrained(str(out), safe_serialization=True)
    GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=[config.eos_token_id, config.pad_token_id],
                     pad_token_id=config.pad_token_id).save_pretrained(str(out))
    for name in TOKENIZER_FILES:
        shutil.copyfile(model_dir / name, out / name)


def main(argv: list[str]) -> int:
    out = Path(argv[1] if len(argv) > 1 else ".tiny-model")
    stamp = out / ".done"
    if not stamp.is_file():
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        build(out)
        stamp.write_text(f"seed {SEED}\n")
        print(f"tiny model in {out}/model, LoRA adapter in {out}/ft")
    prefill, prefill_stamp = out / "prefill", out / "prefill" / ".done"
    if not prefill_stamp.is_file():
        shutil.rmtree(prefill, ignore_errors=True)
        prefill.mkdir()
        build_prefill(out / "model", prefill)
        prefill_stamp.write_text(f"seed {SEED + 1}\n")
        print(f"prefill-sized model in {prefill}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
