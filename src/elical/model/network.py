"""ConfidenceModel: a frozen causal LM + LoRA + a head on the last prompt token, then a sigmoid.

Design (ecosystem conventions where they fit):

* The backbone is loaded with ``AutoModelForSequenceClassification`` (``num_labels=1``), the HF class
  that already pools the last non-pad token of a causal LM. It has no ``lm_head``, so no vocabulary
  logits are computed per token (152k x hidden per token at 7B scale; ``lens``, below, computes them once
  per question). Its ``score`` module is replaced by
  our head (linear with a bias, or the paper's MLP H -> H/2 -> H/4 -> 1), zero-initialised in its last
  layer so training starts at confidence 0.5 without saturating the sigmoid. With ``lens`` the head's
  input also holds :data:`LENS_FEATURES` numbers from the answering LM's own next-token distribution at
  that token: the base model's, LoRA switched off (the probe's adapter must not change what it reads about
  the model), through its output layer (vocabulary x hidden, once per question, not per token).
* LoRA through peft, ``TaskType.SEQ_CLS`` on ``all-linear`` layers (peft leaves ``score`` out of the
  LoRA targets and saves it with the adapter through ``modules_to_save``). The saved folder is a
  standard peft adapter plus the config, the head and the prompt in plain files, and names its base
  model portably (see :mod:`elical.model.model_folder`), so it also loads with transformers + peft alone.
* :meth:`ConfidenceModel.from_pretrained` and :meth:`ConfidenceModel.confidence` are the Python API
  (``from elical import ConfidenceModel``).
* We do NOT call HF's classification forward: it pools by ``pad_token_id`` and cannot pool packed
  sequences. Our forward runs the inner transformer with explicit ``position_ids`` and pools the
  positions given by the batch (last real token of each question), for padded batches (either side)
  and for padding-free packed rows alike (see :mod:`elical.train.batching`). This removes the
  authors' defect of pooling index -1 under right padding.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from elical.core.io import write_json
from elical.core.offline import hub_offline
from elical.model.model_folder import (
    ADAPTER_WEIGHTS_NAME,
    HEAD_WEIGHTS_NAME,
    MODEL_CONFIG_NAME,
    adapter_head_state,
    base_model_record,
    check_base_model,
    find_model_folder,
    head_sizes,
    name_adapter_base,
    read_saved,
    write_head_files,
    write_model_card,
    write_prompt_file,
)
from elical.model.packed_mask import packed_attention_mask
from elical.model.settings import HeadKind, ModelConfig  # ModelConfig: also importable from here
from elical.train.inference import predict_prompts

if TYPE_CHECKING:
    from elical.model.gate import Gate


LENS_FEATURES = 2  # the next-token distribution's largest log-probability and its entropy
LENS_TOP = 5  # with lens_top: its LENS_TOP largest log-probabilities (sorted), then its entropy


def lens_top(config: ModelConfig) -> int:
    """How many of the next-token distribution's largest log-probabilities the head reads (0 without ``lens``)."""
    return (LENS_TOP if config.lens_top else 1) if config.lens else 0


def lens_size(config: ModelConfig) -> int:
    """How many numbers the lens summary adds to the head's input: the largest log-probabilities and the
    entropy (0 without ``lens``)."""
    return lens_top(config) + 1 if config.lens else 0


def head_inputs(hidden: int, config: ModelConfig) -> int:
    """How many numbers the head reads: the hidden state, and with ``lens`` the next-token summary."""
    return hidden + lens_size(config)


def lens_features(pooled: torch.Tensor, output_embedding: torch.Tensor, top: int = 1) -> torch.Tensor:
    """The LM's next-token distribution at each pooled (final-norm) hidden state, summarised as its ``top``
    largest log-probabilities (largest first) and its entropy (rows x top + 1, float32): what the model would say
    first, what it holds in reserve, and how sure it is."""
    logprobs = torch.log_softmax(pooled.float() @ output_embedding.float().T, dim=-1)
    entropy = -(logprobs.exp() * logprobs).sum(-1, keepdim=True)
    largest = logprobs.topk(top, dim=-1).values
    return torch.cat([largest, entropy], dim=-1)


def output_embedding(classifier: Any, base_model: str) -> torch.Tensor:
    """The base LM's output layer (vocabulary x hidden), which the classification backbone does not load: its
    input embedding when the two are tied, else ``lm_head.weight`` read alone from the checkpoint's safetensors."""
    embedding = classifier.get_input_embeddings().weight
    if getattr(classifier.config, "tie_word_embeddings", False):
        return embedding.detach()  # the same storage; a plain tensor, so no module registers it as a parameter
    from safetensors import safe_open

    from elical.model.loading import resolve_model

    source = resolve_model(base_model)
    for path in sorted(Path(source.path).glob("*.safetensors")) if not source.gguf_file else []:
        with safe_open(str(path), framework="pt") as weights:
            name = next((k for k in weights.keys() if k.endswith("lm_head.weight")), None)  # noqa: SIM118
            if name is not None:
                return weights.get_tensor(name).to(embedding.device, embedding.dtype)
    raise ValueError(f"lens needs the output layer of {base_model!r}, which has one of its own (tie_word_embeddings "
                     "is false), but no lm_head.weight was found in its safetensors files; leave lens off for it")


def build_head(hidden: int, kind: HeadKind) -> nn.Module:
    """The confidence head: linear (with bias) or the paper's MLP H -> H/2 -> H/4 -> 1 (ReLU), its last
    layer zero-initialised (confidence 0.5 to start)."""
    sizes = head_sizes(hidden, kind)
    layers = [nn.Linear(n_in, n_out) for n_in, n_out in itertools.pairwise(sizes)]
    nn.init.zeros_(layers[-1].weight)
    nn.init.zeros_(layers[-1].bias)
    if kind == "linear":
        return layers[0].float()
    modules: list[nn.Module] = []
    for layer in layers:
        modules += [layer, nn.ReLU()]
    return nn.Sequential(*modules[:-1]).float()


def qa_prompt(tokenizer: Any, question: str, config: ModelConfig) -> str:
    """The QA prompt the model answers from (records that carry their rendered ``prompt`` use that):
    system prompt and question in the tokenizer's chat template, or the plain question prompt for
    base models without one."""
    user = config.qa_template.format(question=question)
    if not getattr(tokenizer, "chat_template", None):
        return user
    messages = [{"role": "system", "content": config.system_prompt}] if config.system_prompt else []
    messages.append({"role": "user", "content": user})
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def _backbone(config: ModelConfig, device: str | torch.device) -> tuple[Any, Any]:
    """(classifier, tokenizer): ``config.base_model`` loaded with a one-score head, as ``config`` says."""
    from elical.model.loading import load_model

    classifier, tokenizer, _ = load_model(config.base_model, "score", config.dtype, device, config.attn_implementation)
    return classifier, tokenizer


class ConfidenceModel(nn.Module):
    """Backbone (+ LoRA) + head; ``forward`` returns one logit per pooled position."""

    gate: Gate | None = None  # set by from_pretrained: the folder's gate.json, if any

    def __init__(self, net: Any, tokenizer: Any, config: ModelConfig, lens_weight: torch.Tensor | None = None):
        super().__init__()
        self.net = net  # a PeftModel over a *ForSequenceClassification, or the bare classifier
        self.tokenizer = tokenizer
        self.config = config
        # with lens: the base LM's output layer (frozen; the input embedding itself when tied, never saved)
        self.lens_weight = lens_weight
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
        # Packed rows get their attention mask from elical.model.packed_mask (no host sync per forward);
        # False leaves it to transformers (benchmarks/bench_train.py's flex-detect variant compares).
        self.own_packed_mask = True

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_backbone(
        cls,
        classifier: Any,
        tokenizer: Any,
        config: ModelConfig,
        adapter_dir: str | os.PathLike | None = None,
        trainable: bool = True,
    ) -> ConfidenceModel:
        """Wrap a *ForSequenceClassification backbone: new head + LoRA, or load them from a saved folder."""
        from peft import LoraConfig, PeftModel, TaskType, get_peft_model

        hidden = classifier.config.hidden_size
        device = next(classifier.parameters()).device
        lens_weight = output_embedding(classifier, config.base_model) if config.lens else None
        classifier.score = build_head(head_inputs(hidden, config), config.head).to(device)
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
            return cls(classifier, tokenizer, config, lens_weight)
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
        return cls(net, tokenizer, config, lens_weight)

    @classmethod
    def create(cls, config: ModelConfig, device: str | torch.device = "cpu") -> ConfidenceModel:
        """A fresh model around the causal LM ``config.base_model`` (alias, folder, .gguf or cached name)."""
        if not config.base_model:
            raise ValueError("model config has no base_model (path or name of a Hugging Face causal LM)")
        return cls.from_backbone(*_backbone(config, device), config)

    @classmethod
    def load(
        cls,
        path: str | os.PathLike,
        device: str | torch.device = "cpu",
        base_model: str | None = None,
        trainable: bool = False,
        merge: bool = True,
    ) -> ConfidenceModel:
        """Load a saved model (adapter + head + config) on CPU or GPU; ``base_model`` overrides the
        recorded base model (e.g. a copy in another folder).

        For inference (``trainable=False``) the LoRA weights are merged into the backbone, so prediction
        costs exactly one plain forward pass.
        """
        path = Path(path)
        saved = read_saved(path)
        config = ModelConfig.from_dict(saved["model"])
        weights = path / (ADAPTER_WEIGHTS_NAME if config.lora else HEAD_WEIGHTS_NAME)
        if not weights.exists():  # elical saves safetensors only; a pickled adapter_model.bin is not loaded
            raise FileNotFoundError(f"{weights} not found: {path} holds no elical model weights (safetensors)")
        config.base_model = base_model or config.base_model
        check_base_model(path, saved, config.base_model, overridden=bool(base_model))
        return cls._from_folder(config, device, path, trainable, merge)

    @classmethod
    def _from_folder(cls, config: ModelConfig, device: str | torch.device, path: Path, trainable: bool,
                    merge: bool) -> ConfidenceModel:
        """The backbone of ``config`` with the LoRA and head saved in ``path`` (see :meth:`load`)."""
        model = cls.from_backbone(*_backbone(config, device), config, adapter_dir=path, trainable=trainable)
        if merge and not trainable and not config.lens:  # lens reads the base model: its LoRA must stay apart
            model.merge_adapter()
        return model

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike,
        device: str | torch.device = "auto",
        base_model: str | None = None,
    ) -> ConfidenceModel:
        """Load a trained model for inference: a model folder, or an ``elical train`` output (its ``model/``).

        ``device`` "auto" is CUDA when available, else CPU; ``base_model`` points to the base model
        when it is not found under the name the folder records. ``model.gate`` is the folder's
        answer/retrieve/abstain gate (``gate.json`` of ``elical gate``), or None.
        """
        from elical.model.gate import load_gate
        from elical.model.loading import pick_device

        folder = find_model_folder(path)
        model = cls.load(folder, device=pick_device(device), base_model=base_model)
        model.gate = load_gate(folder)
        return model

    def confidence(self, questions: Sequence[str], batch_tokens: int = 16384, row_length: int = 1024) -> np.ndarray:
        """Confidence in [0, 1] that the base model answers each question correctly, in question order.

        Questions are rendered with the saved QA prompt and run in packed batches of about
        ``batch_tokens`` tokens: the same numbers as ``elical predict``.
        """
        if isinstance(questions, str):
            raise TypeError("confidence() takes a list of questions, not one string")
        prompts = [qa_prompt(self.tokenizer, q, self.config) for q in questions]
        return np.asarray(predict_prompts(self, prompts, batch_tokens, row_length), dtype=np.float64)

    def save(self, path: str | os.PathLike, meta: dict[str, Any] | None = None,
             state_dict: dict[str, torch.Tensor] | None = None) -> None:
        """Save as a standard peft adapter (with the head in modules_to_save), the head and prompt in
        plain files, elical_model.json (config with the base model's portable name, and ``meta``) and a
        model card (README.md).

        ``state_dict`` (keys of this module, e.g. gathered by ``accelerator.get_state_dict`` under
        FSDP) overrides the parameters held here.
        """
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if self.config.lora:
            inner = None
            if state_dict is not None:
                inner = {k.split("net.", 1)[1]: v for k, v in state_dict.items() if "net." in k}
            with hub_offline():  # peft would ask the Hub whether the base model's vocabulary was resized
                self.net.save_pretrained(str(path), state_dict=inner)
            head_state = adapter_head_state(path)
        else:
            head_state = self.classifier.score.state_dict()
        inputs = head_inputs(self.classifier.config.hidden_size, self.config)
        write_head_files(path, self.config.head, head_sizes(inputs, self.config.head), head_state,
                         lens=lens_top(self.config))
        write_prompt_file(path, self.config.system_prompt, self.config.qa_template, self.config.max_length)
        base = self.base_model_record()
        if self.config.lora:
            name_adapter_base(path, base["name"])
        config = {**self.config.model_dump(), "base_model": base["name"]}
        write_json(path / MODEL_CONFIG_NAME, {"model": config, "base_model": base, **(meta or {})})
        write_model_card(path, config, meta or {})

    def base_model_record(self) -> dict[str, Any]:
        """The base model's portable name, path and fingerprint (computed once per base model)."""
        cached = getattr(self, "_base_record", None)
        if cached is None or cached[0] != self.config.base_model:
            cached = (self.config.base_model, base_model_record(self.config.base_model))
            self._base_record = cached
        return cached[1]

    # ------------------------------------------------------------------ parts

    @property
    def classifier(self) -> Any:
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
        """What the head reads at each pooled position (flat index into batch x length): the final-layer
        hidden state, followed with ``lens`` by :func:`lens_features` of the base model's (LoRA off; with
        LoRA that is a second forward pass, without gradients)."""
        if attention_mask is None and self.own_packed_mask:
            attention_mask = packed_attention_mask(position_ids, self.transformer.config)
        inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids}
        pooled = self._pooled(inputs, pool_index)
        if not self.config.lens:
            return pooled
        if self.config.lora:
            with torch.no_grad(), self.net.disable_adapter():
                base = self._pooled(inputs, pool_index)
        else:
            base = pooled
        assert self.lens_weight is not None  # set by from_backbone whenever config.lens is on
        summary = lens_features(base, self.lens_weight.to(base.device), lens_top(self.config))
        return torch.cat([pooled, summary.to(pooled.dtype)], dim=-1)

    def _pooled(self, inputs: dict[str, torch.Tensor | None], pool_index: torch.Tensor) -> torch.Tensor:
        """The final-layer hidden state at each pooled position."""
        out = self.transformer(**inputs, use_cache=False)
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


# Attribute of a LoRA Linear holding (A, B) weight copies that fused_lora_forward reads instead of the weights.
LORA_COPY_ATTR = "elical_lora_copy"


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
    copy = getattr(self, LORA_COPY_ATTR, None)  # (A, B) in the compute dtype, see elical.train.speed.LoraCopies
    if copy is None:
        lora_a = self.lora_A[name]
        xa = lora_a(self.lora_dropout[name](self._cast_input_dtype(x, lora_a.weight.dtype)))
        weight_b = self.lora_B[name].weight
    else:
        xa = nn.functional.linear(self.lora_dropout[name](x), copy[0])
        weight_b = copy[1]
    flat = result.view(-1, result.shape[-1])
    # The base output is not saved for backward by the linear layer, so it can be updated in place.
    flat.addmm_(xa.reshape(-1, xa.shape[-1]).to(result.dtype), weight_b.to(result.dtype).t(), alpha=self.scaling[name])
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
                module.forward = MethodType(fused_lora_forward, module)  # type: ignore[method-assign]
            else:
                module.__dict__.pop("forward", None)
            count += 1
    return count
