"""The YAML schema of the rule catalog (`rules.yaml`) and the predicate matcher.

A rule is data: what it matches (observation kind plus field predicates), where it applies
(GPU models, job states), what it means (role, category, weight) and what it explains.
Loading validates every rule and names the rule id and field of the first problem.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from attribution_dagster.core.context import JobState
from attribution_dagster.core.formats import startcache, yamltext
from attribution_dagster.core.observation import Observation
from attribution_dagster.rules.vocabulary import vocabulary


class RulebookError(ValueError):
    """The rule catalog is malformed; the message names the file, rule id and field."""


# Observation fields a predicate may name; `attrs.<name>` reaches into attrs.
OBS_FIELDS = (
    "node",
    "gpu",
    "pci",
    "port",
    "peer",
    "code",
    "excerpt",
    "source",
    "parser",
    "time_quality",
)
PREDICATE_OPS = ("in", "not_in", "not", "range", "gte", "gt", "lte", "lt", "regex", "exists")
SYMPTOMS_TOKEN = "symptoms"  # in `explains`: every symptom-role observation
TEMPLATE_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)(?:\|([^}]*))?\}")
TEMPLATE_NAMES = set(OBS_FIELDS) | {"kind", "gpu_ref", "time"}

Role = Literal["cause", "symptom", "noise"]
Scope = Literal["node", "job"]


def _same(a: Any, b: Any) -> bool:
    """Equality that never confuses booleans with numbers and tolerates '12' vs 12."""
    if a is None or b is None:
        return a is b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) or isinstance(b, (int, float)):
        na, nb = _num(a), _num(b)
        return na is not None and nb is not None and na == nb
    return str(a).lower() == str(b).lower()


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, (int, float)):
        return float(v)
    try:
        return float(str(v).strip())
    except ValueError:
        return None


class Predicate(BaseModel):
    """One field test. YAML forms: a scalar (equality), a list (any of), or a mapping of
    operators that must all hold: in, not_in, not, range [lo, hi], gte, gt, lte, lt,
    regex (searched, use `(?i)` for case-insensitive), exists (true/false)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    in_: list[Any] | None = Field(default=None, alias="in")
    not_in: list[Any] | None = None
    not_: Any = Field(default="__unset__", alias="not")
    range: tuple[float, float] | None = None
    gte: float | None = None
    gt: float | None = None
    lte: float | None = None
    lt: float | None = None
    regex: str | None = None
    exists: bool | None = None
    eq: Any = "__unset__"

    @field_validator("regex")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"bad regex {v!r}: {exc}") from exc
        return v

    @classmethod
    def parse(cls, raw: Any) -> Predicate:
        if isinstance(raw, dict):
            unknown = set(raw) - set(PREDICATE_OPS)
            if unknown:
                raise ValueError(
                    f"unknown operator(s) {sorted(unknown)}; use one of {list(PREDICATE_OPS)}"
                )
            return cls.model_validate(raw)
        if isinstance(raw, list):
            return cls.model_validate({"in": raw})
        return cls.model_validate({"eq": raw})

    def test(self, value: Any) -> bool:
        if self.exists is not None and (value is not None) != self.exists:
            return False
        if self.eq != "__unset__" and not _same(value, self.eq):
            return False
        if self.in_ is not None and not any(_same(value, x) for x in self.in_):
            return False
        if self.not_in is not None and any(_same(value, x) for x in self.not_in):
            return False
        if self.not_ != "__unset__" and _same(value, self.not_):
            return False
        if self.regex is not None and (value is None or not re.search(self.regex, str(value))):
            return False
        bounds = (self.range, self.gte, self.gt, self.lte, self.lt)
        if any(b is not None for b in bounds):
            n = _num(value)
            if n is None:
                return False
            if self.range is not None and not (self.range[0] <= n <= self.range[1]):
                return False
            if self.gte is not None and not n >= self.gte:
                return False
            if self.gt is not None and not n > self.gt:
                return False
            if self.lte is not None and not n <= self.lte:
                return False
            if self.lt is not None and not n < self.lt:
                return False
        return True


def field_value(obs: Observation, name: str) -> Any:
    if name == "kind":
        return obs.kind
    if name.startswith("attrs."):
        return obs.attrs.get(name[len("attrs.") :])
    return getattr(obs, name)


class Match(BaseModel):
    """`kind` (one kind or a list) plus `field: predicate` entries."""

    model_config = ConfigDict(frozen=True)

    kinds: tuple[str, ...]
    where: dict[str, Predicate] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _split(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            raise ValueError("match must be a mapping with at least `kind`")
        if "kinds" in raw and "where" in raw:
            return raw
        raw = dict(raw)
        kind = raw.pop("kind", None)
        if kind is None:
            raise ValueError("match needs `kind`")
        kinds = tuple(kind) if isinstance(kind, list) else (kind,)
        for k in kinds:
            if k not in vocabulary().kinds:
                raise ValueError(f"unknown observation kind {k!r}")
        where: dict[str, Predicate] = {}
        for key, pred in raw.items():
            if key not in OBS_FIELDS and not key.startswith("attrs."):
                raise ValueError(
                    f"unknown field {key!r}; use one of {list(OBS_FIELDS)} or attrs.<name>"
                )
            where[key] = Predicate.parse(pred)
        return {"kinds": kinds, "where": where}

    def test(self, obs: Observation) -> bool:
        if obs.kind not in self.kinds:
            return False
        return all(p.test(field_value(obs, k)) for k, p in self.where.items())


class Shared(BaseModel):
    """The same fault on many nodes at once points at something they share."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    label: str = Field(description="what they share: 'switch', 'storage', ...")
    min_nodes: int = Field(default=2, ge=2)
    min_share: float = Field(default=0.5, gt=0, le=1, description="share of the job's nodes")
    enough_nodes: int | None = Field(
        default=3,
        ge=2,
        description="this many nodes suffice whatever the share (null: only min_share counts)",
    )
    within_seconds: float | None = Field(default=None, ge=0, description="default: skew tolerance")
    name_nodes: bool = Field(
        default=False,
        description="when the event hits only some of the job's nodes, name them as suspects "
        "(their common switch / rack is where to look); when it hits every node, none",
    )


class Repeat(BaseModel):
    """A note when the same observation repeats on the same key (e.g. XID 13 on one GPC)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_count: int = Field(ge=2)
    same: list[str] = Field(min_length=1)
    note: str


class Example(BaseModel):
    """An observation the rule must classify (the catalog test fires every rule on it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    code: int | None = None
    gpu: int | None = None
    pci: str | None = None
    port: str | None = None
    peer: str | None = None
    attrs: dict[str, Any] = Field(default_factory=dict)
    excerpt: str = ""
    gpu_model: str | None = None
    state: JobState | None = None

    def observation(self, node: str, time: Any, locator: str = "example") -> Observation:
        return Observation(
            kind=self.kind,
            node=node,
            time=time,
            gpu=self.gpu,
            pci=self.pci,
            port=self.port,
            peer=self.peer,
            code=self.code,
            attrs=self.attrs,
            excerpt=self.excerpt or f"{self.kind} example",
            source="example",
            locator=locator,
            parser="example",
        )


def gpu_model_is(gpu_model: str, family: str) -> bool:
    """'H100 80GB HBM3' is an H100; 'GB200' is not a B200; comparison ignores case and spaces."""
    model = gpu_model.strip().upper().replace(" ", "").removeprefix("NVIDIA")
    family = family.strip().upper().replace(" ", "")
    if model == family:
        return True
    return model.startswith(family) and not model[len(family)].isdigit()


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_.\-]*$")
    description: str = Field(min_length=1)
    match: Match
    role: Role
    category: str | None = None
    weight: float = Field(default=0, ge=0, le=100)
    gpu_models: list[str] | None = None
    states: list[JobState] | None = None
    scope: Scope = "node"
    locates: bool = Field(default=True, description="the observation's node is a suspect")
    node_from: list[str] = Field(default_factory=list, description="attrs naming the faulty node")
    late_ok: bool = Field(default=False, description="not penalized for coming after symptoms")
    onset: bool = Field(default=True, description="symptom marks the failure onset (timing)")
    explains: list[str] = Field(default_factory=lambda: [SYMPTOMS_TOKEN])
    yields_to: list[str] = Field(default_factory=list)
    recovered_by: Match | None = Field(
        default=None,
        description="an observation on the same node, after the cause and well before the "
        "failure, that says the fault cleared (NFS server OK): the cause was a transient blip",
    )
    terminal: bool = Field(
        default=False,
        description="the job ended here (a cancel): causes logged at or after it, within clock "
        "skew, are teardown",
    )
    fallback: bool = Field(
        default=False,
        description="a cause only when nothing else is: dropped whenever another cause fits "
        "(XID 63, a row remap that succeeded, explains a failure only when alone)",
    )
    about_peer: bool = Field(
        default=False,
        description="the observation names a remote peer (NCCL IB retry exceeded toward an IP): "
        "when the job's peer errors converge on one node, it is a symptom about that node",
    )
    rivals: list[str] = Field(
        default_factory=list,
        description="causes: categories this observation fits as well as its own (the line "
        "alone does not tell them apart: `CUDA error: unknown error` is a lost GPU or a driver "
        "fault): it is also a candidate of each, at the same weight, so unless other evidence "
        "decides, the result is ambiguous between them",
    )
    follows: str | None = Field(
        default=None,
        description="attrs.<name> holding the code of an earlier observation of the same kind "
        "this one says it is caused by (XID 45 `caused by previous Xid N`): where that "
        "observation is present on the same node (and GPU, when both name one), this one is "
        "classified by the rule that classifies it (it follows the named fault); where absent, "
        "by this rule",
    )
    collapse: bool = Field(
        default=False,
        description="symptoms: this observation marks the job's collective collapse (a "
        "collective timeout, the watchdog's teardown, an NCCL abort): from here on every rank "
        "fails in whatever way it happens to fail",
    )
    after_collapse: Literal["cause", "symptom"] = Field(
        default="cause",
        description="causes: `symptom` = logged after the collapse (provably later than a "
        "`collapse` observation: a later line of the same file, or a later time beyond clock "
        "skew), the observation is downstream of it and read as a symptom, not a cause (an "
        "absurd CUDA OOM, an illegal memory access on every rank)",
    )
    shared: Shared | None = None
    repeat: Repeat | None = None
    summary: str = Field(min_length=1)
    remediation: str | None = None
    example: Example

    @field_validator("gpu_models")
    @classmethod
    def _models_upper(cls, v: list[str] | None) -> list[str] | None:
        return [m.strip().upper() for m in v] if v else v

    @field_validator("explains", "yields_to")
    @classmethod
    def _known_targets(cls, v: list[str]) -> list[str]:
        for item in v:
            base = item.split("@", 1)[0]
            if item.count("@") > 1 or ("@" in item and item.split("@", 1)[1] != "node"):
                raise ValueError(f"{item!r}: the only qualifier is '@node' (same node only)")
            known = vocabulary()
            if base != SYMPTOMS_TOKEN and base not in known.categories and base not in known.kinds:
                raise ValueError(
                    f"{item!r} is neither a category, an observation kind nor 'symptoms'"
                )
        return v

    @field_validator("summary")
    @classmethod
    def _template(cls, v: str) -> str:
        for m in TEMPLATE_FIELD.finditer(v):
            name = m.group(1)
            if name not in TEMPLATE_NAMES and not name.startswith("attrs."):
                raise ValueError(f"unknown template field {{{name}}}")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Rule:
        if self.role == "cause":
            categories = vocabulary().categories
            if self.category not in categories:
                raise ValueError(f"category: {self.category!r} is not one of {sorted(categories)}")
            if self.weight <= 0:
                raise ValueError("weight: a cause needs a weight > 0")
        elif self.category is not None:
            raise ValueError(f"category: only causes carry a category (role is {self.role})")
        if self.example.kind not in self.match.kinds:
            raise ValueError(f"example: kind {self.example.kind!r} is not matched by this rule")
        for name in self.node_from:
            if not name.startswith("attrs."):
                raise ValueError(f"node_from: {name!r} must be attrs.<name>")
        if (self.recovered_by is not None or self.terminal) and self.role != "cause":
            raise ValueError("recovered_by / terminal: only for causes")
        if self.rivals and self.role != "cause":
            raise ValueError("rivals: only for causes")
        for cat in self.rivals:
            if cat not in vocabulary().categories or cat == self.category:
                raise ValueError(f"rivals: {cat!r} is not another category")
        if self.follows is not None and not self.follows.startswith("attrs."):
            raise ValueError(f"follows: {self.follows!r} must be attrs.<name>")
        if self.after_collapse != "cause" and self.role != "cause":
            raise ValueError("after_collapse: only for causes")
        if self.collapse and self.role != "symptom":
            raise ValueError("collapse: only for symptoms")
        return self

    def describe(self) -> dict[str, Any]:
        """The rule as plain data (the catalog CLI and docs/rules.md read this)."""
        match: dict[str, Any] = {"kind": list(self.match.kinds)}
        for k, p in self.match.where.items():
            match[k] = p.model_dump(by_alias=True, exclude_defaults=True)
            if "eq" in match[k]:
                match[k] = match[k]["eq"]
        return {
            "id": self.id,
            "description": self.description,
            "role": self.role,
            "category": self.category,
            "weight": self.weight,
            "match": match,
            "gpu_models": self.gpu_models,
            "states": [s.value for s in self.states] if self.states else None,
            "scope": self.scope,
            "shared": self.shared.model_dump() if self.shared else None,
            "explains": self.explains if self.role == "cause" else [],
            "yields_to": self.yields_to,
            "recovered_by": list(self.recovered_by.kinds) if self.recovered_by else [],
            "terminal": self.terminal,
            "rivals": self.rivals,
            "follows": self.follows,
            "collapse": self.collapse,
            "after_collapse": self.after_collapse,
            "fallback": self.fallback,
            "summary": self.summary,
            "remediation": self.remediation,
            "example": self.example.model_dump(exclude_defaults=True, mode="json"),
        }

    def applies(self, gpu_model: str | None, state: JobState | None) -> bool:
        if self.gpu_models and gpu_model:
            if not any(gpu_model_is(gpu_model, m) for m in self.gpu_models):
                return False
        if self.states and state is not None and state not in self.states:
            return False
        return True


class EngineTuning(BaseModel):
    """Scoring knobs, in the same file so an operator sees them next to the weights."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    min_score: float = Field(default=35, ge=0)
    ambiguity_margin: float = Field(default=0.85, gt=0, le=1)
    precede_bonus: float = 10
    earliest_bonus: float = 5
    late_penalty: float = 60
    unknown_time_penalty: float = 15
    corroboration_cap: float = 8
    metric_tolerance_seconds: float = Field(default=30, ge=0)
    recovery_grace_seconds: float = Field(
        default=120, ge=0, description="a fault that cleared this long before the failure onset"
    )
    max_chain_links: int = Field(default=40, ge=5)
    progress_grace_seconds: float = Field(
        default=300,
        ge=0,
        description="a fault after which training progress went on this long (on the affected "
        "nodes, else the job) did not stop the job: demoted like a recovered blip",
    )
    silence_seconds: float = Field(
        default=120,
        ge=0,
        description="a node whose logs stop this long before most others' (and the job end) is "
        "silent; with corroboration (peers name it, the scheduler failed it) it is node.down",
    )


class LeafSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    min_nodes: int = Field(default=2, ge=2, description="job nodes under the switch hit together")
    min_share: float = Field(
        default=1.0, gt=0, le=1, description="share of the job's nodes under the switch hit"
    )
    switch_evidence: bool = Field(
        default=True, description="a switch-side line naming the switch names it without the share"
    )


class SpineSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    min_leaves: int = Field(default=2, ge=2, description="leaves of one spine hit together")
    switch_evidence: bool = True


class NvlinkDomainSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    min_nodes: int = Field(default=2, ge=2, description="trays of one domain with an NVLink fault")
    evidence_origins: list[str] = Field(
        default_factory=lambda: ["fabricmanager", "imex"],
        description="attrs.origin of the Fabric Manager / IMEX lines the level needs",
    )


class FaultDomainSpec(BaseModel):
    """rules.yaml `fault_domains:` (applied by engine/faultdomain.py): which categories are
    placed, and each level's threshold."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    categories: dict[str, Literal["network", "nvlink"]] = Field(
        default_factory=lambda: {"network.fabric": "network", "gpu.nvlink": "nvlink"}
    )
    within_seconds: float = Field(default=5, ge=0)
    leaf: LeafSpec = Field(default_factory=LeafSpec)
    spine: SpineSpec = Field(default_factory=SpineSpec)
    nvlink_domain: NvlinkDomainSpec = Field(default_factory=NvlinkDomainSpec)


class Rulebook(BaseModel):
    model_config = ConfigDict(frozen=True)

    version: str
    engine: EngineTuning = Field(default_factory=EngineTuning)
    fault_domains: FaultDomainSpec = Field(default_factory=FaultDomainSpec)
    rules: list[Rule]


def _loc(err: dict[str, Any]) -> str:
    parts = [str(p) for p in err.get("loc", ()) if not str(p).startswith("function-")]
    return ".".join(parts) or "(rule)"


def load_rulebook(path: Path, cached: bool = False) -> tuple[Rulebook, bytes]:
    """Read and validate a rules file; raise RulebookError naming the rule id and field.
    `cached`: the YAML's data through the start-up cache (docs/performance.md)."""
    try:
        blob = path.read_bytes()
    except OSError as exc:
        raise RulebookError(f"{path}: cannot read rules file: {exc}") from exc
    loaded = None
    try:
        if cached:
            loaded = startcache.loaded_from(path, blob, text=False)
            data = loaded.data
        else:
            data = yamltext.safe_load(blob)
    except yamltext.YAMLError as exc:
        raise RulebookError(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("rules"), list):
        raise RulebookError(f"{path}: expected a mapping with `version` and a `rules` list")
    if not isinstance(data.get("version"), str):
        raise RulebookError(f"{path}: field 'version' must be a string like \"2026.12.1\"")
    try:
        tuning = EngineTuning.model_validate(data.get("engine") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise RulebookError(f"{path}: engine field '{_loc(err)}': {err['msg']}") from exc
    try:
        domains = FaultDomainSpec.model_validate(data.get("fault_domains") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        raise RulebookError(f"{path}: fault_domains field '{_loc(err)}': {err['msg']}") from exc
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, raw in enumerate(data["rules"]):
        rid = raw.get("id", f"#{i}") if isinstance(raw, dict) else f"#{i}"
        try:
            rule = Rule.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            msg = err["msg"].removeprefix("Value error, ")
            raise RulebookError(f"{path}: rule '{rid}' field '{_loc(err)}': {msg}") from exc
        if rule.id in seen:
            raise RulebookError(f"{path}: rule '{rule.id}' field 'id': duplicate rule id")
        seen.add(rule.id)
        rules.append(rule)
    book = Rulebook(version=data["version"], engine=tuning, fault_domains=domains, rules=rules)
    if loaded is not None:
        startcache.store(loaded)
    return book, blob
