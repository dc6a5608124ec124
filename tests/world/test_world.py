"""The synthetic world: deterministic for a seed, exposure as configured, splits clean, prompts as annotate's."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from elical.world import (
    WorldConfig,
    corpus_sentences,
    evaluation_questions,
    generate_world,
    qa_tuning_examples,
)
from elical.world.config import LMConfig, load_world_configs
from elical.world.relations import PERSON_RELATIONS

SMALL = {"n_people": 120, "n_ood_per_relation": 30, "n_paraphrase": 40, "n_multihop": 30, "n_mc": 40}


@pytest.fixture(scope="module")
def world():
    return generate_world(WorldConfig(seed=3, **SMALL))


def test_same_seed_same_world_other_seed_other_world(world):
    again = generate_world(WorldConfig(seed=3, **SMALL))
    assert again.fingerprint() == world.fingerprint()
    assert corpus_sentences(again) == corpus_sentences(world)
    assert [q.question for q in evaluation_questions(again)] == [q.question for q in evaluation_questions(world)]
    assert generate_world(WorldConfig(seed=4, **SMALL)).fingerprint() != world.fingerprint()


def test_exposure_spreads_from_never_to_often_and_contested_facts_favour_a_wrong_value(world):
    facts = [f for p in world.people for f in p.facts.values()]
    mentions = Counter(min(f.mentions, 8) for f in facts)
    assert mentions[0] > 0.15 * len(facts)  # never stated
    assert mentions[8] > 0  # stated often
    contested = [f for f in facts if f.wrong_value is not None]
    assert contested and all(f.contested and f.wrong_value != f.value for f in contested)
    assert all(f.wrong_mentions > f.mentions for f in contested)


def test_corpus_states_each_fact_exactly_as_often_as_the_world_says():
    cfg = WorldConfig(seed=1, statement_noise=0.0, **SMALL)
    world = generate_world(cfg)
    text = corpus_sentences(world)
    person = next(p for p in world.people if p.facts["profession"].mentions >= 2 and not p.facts["profession"].contested)
    fact = person.facts["profession"]
    stated = [s for s in text if s.startswith(person.name) or person.name in s]
    rel = next(r for r in PERSON_RELATIONS if r.name == "profession")
    patterns = [re.escape(t).replace(re.escape("{s}"), re.escape(person.name)).replace(re.escape("{o}"), r"(\w+)")
                for t in rel.statements]
    values = [m.group(1) for s in stated for p in patterns if (m := re.fullmatch(p, s))]
    assert values.count(fact.value) == fact.mentions
    assert len(values) == fact.mentions + fact.wrong_mentions


def test_questions_ask_only_about_people_the_lm_never_saw_in_qa_format(world):
    tuned = {p.name for p in world.people if p.qa_tuned}
    questions = evaluation_questions(world)
    assert tuned and not any(q.info["entity"] in tuned for q in questions)
    qa_entities = {e.question for e in qa_tuning_examples(world)}
    assert not qa_entities & {q.question for q in questions if not q.choices}
    groups = {(q.dataset, q.info["group"]) for q in questions}
    in_domain = {r.name for r in PERSON_RELATIONS if r.in_domain}
    assert {d for d, g in groups if g == "in-domain"} == in_domain
    assert {"language", "sport", "paraphrase", "multihop"} <= {d for d, g in groups if g == "ood"}
    assert {d for d, g in groups if g == "mc"} == {"mc"}
    train = {q.question for q in questions if q.split == "train"}
    assert train and all(q.info["group"] == "in-domain" for q in questions if q.split == "train")
    assert not train & {q.question for q in questions if q.split == "test"}


def test_multiple_choice_gold_letter_names_the_true_value(world):
    by_name = {p.name: p for p in world.people}
    for q in (q for q in evaluation_questions(world) if q.choices):
        letter = q.answers[0]
        chosen = q.choices["ABCDEFGHIJ".index(letter)]
        assert chosen == by_name[q.info["entity"]].facts[q.info["relation"]].value
        assert len(set(q.choices)) == len(q.choices) == world.config.mc_options


def test_multihop_answer_is_the_country_of_the_birth_city(world):
    by_name = {p.name: p for p in world.people}
    hops = [q for q in evaluation_questions(world) if q.dataset == "multihop"]
    assert hops
    for q in hops:
        assert q.answers == [world.city_country[by_name[q.info["entity"]].facts["birth_city"].value]]


def test_config_errors_name_the_bad_key(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("world: {n_peple: 5}\n")
    with pytest.raises(ValueError, match="n_peple"):
        load_world_configs(str(path))
    with pytest.raises(ValueError, match="unknown relation"):
        generate_world(WorldConfig(contested={"hair_colour": 0.1}, **SMALL))
    with pytest.raises(ValueError, match="expected 'llama' or 'qwen2', got 'gpt2'"):
        LMConfig(arch="gpt2")


def test_tokenizer_covers_the_world_and_renders_prompts_exactly_as_annotate(world):
    from elical.annotate.prompts import PromptConfig, qa_prompt
    from elical.world.lm import encode_qa, user_text, world_tokenizer
    from elical.world.tokenizer import chat_prompt

    lm = LMConfig()
    tok = world_tokenizer(world, lm)
    prompts = PromptConfig(system="", qa=lm.qa_template, mmlu=lm.mc_template)
    examples = evaluation_questions(world)
    for ex in [e for e in examples if e.choices][:3] + [e for e in examples if not e.choices][:3]:
        ours = chat_prompt(tok, user_text(ex, lm), lm.system_prompt)
        theirs = tok.apply_chat_template(qa_prompt(ex.to_item(), prompts), tokenize=False, add_generation_prompt=True)
        assert ours == theirs
        ids, labels = encode_qa(tok, ex, lm)
        assert tok.unk_token_id not in ids
        answer = [i for i, y in zip(ids, labels) if y != -100]
        assert tok.decode(answer, skip_special_tokens=True) == " ".join(ex.answers[0].split())
    assert all(tok.unk_token_id not in tok(s)["input_ids"] for s in corpus_sentences(world)[:500])


def test_train_lm_on_cpu_saves_a_loadable_hf_checkpoint(tmp_path):
    import torch

    from elical.world.lm import load_world_lm, train_world_lm

    torch.set_num_threads(1)
    lm = LMConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64, steps=3,
                  batch_size=4, seq_len=48, warmup_steps=1)
    final = train_world_lm(WorldConfig(seed=5, **SMALL), lm, tmp_path / "lm", device="cpu", log=lambda _: None,
                           probe_every=3)
    assert 0.0 <= final["accuracy"] <= 1.0 and final["step"] == 3
    model, tok, meta = load_world_lm(tmp_path / "lm")
    assert type(model).__name__ == "LlamaForCausalLM" and model.dtype == torch.float32
    assert meta["world_fingerprint"] == generate_world(WorldConfig(seed=5, **SMALL)).fingerprint()
    assert meta["params"] == sum(p.numel() for p in model.parameters())
    assert tok.chat_template and tok.eos_token == "<|im_end|>"
    assert (tmp_path / "lm" / "model.safetensors").exists()
