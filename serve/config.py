"""The app config: one strict pydantic model per concern, loaded from a Serve YAML file.

``configs/embedded.yaml`` is a valid Ray Serve config file whose application
``args`` are an :class:`AppConfig`. Ray Serve silently drops unknown keys, so
:func:`load_serve_file` validates the *whole* file strictly (top-level, the
application entry and its args) and reports a bad key with its path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, model_validator

from models.config import AutoscalingConfig, DeploymentOptions, ModelDeploymentConfig
from pipelines.domains import UnknownDomain, pack_factory
from pipelines.errors import ConfigError
from pipelines.protocols import ROLES
from pipelines.registry import PipelineSettings, TandemSettings, kind_record

__all__ = [
    "add_pack_paths",
    "app_runtime_env",
    "AutoscalingConfig",
    "DeploymentOptions",
    "ModelDeploymentConfig",
    "RolesConfig",
    "ApiKeyEntry",
    "AuthConfig",
    "LimitsConfig",
    "AdmissionConfig",
    "IngressConfig",
    "StoreConfig",
    "TelemetryConfig",
    "PipelineSettings",
    "DomainConfig",
    "DeploymentsConfig",
    "RolePrice",
    "CostConfig",
    "AppConfig",
    "ServeFile",
    "load_serve_file",
    "parse_app_config",
    "format_validation_error",
    "merge_args",
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RolesConfig(Strict):
    """Role → model deployment name (a key of ``AppConfig.models``)."""

    orchestrator: str
    generator: str
    slot_extractor: str


class ApiKeyEntry(Strict):
    """One API key as the server knows it: an id (the principal) and the key's SHA-256, never the key."""

    id: str = Field(..., pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    sha256: str = Field(..., pattern=r"^[0-9a-f]{64}$", description="hex SHA-256 of the key")


class AuthConfig(Strict):
    """API keys (``Authorization: Bearer <key>``; gRPC metadata ``authorization``).

    Off: single-tenant development mode, every request is the principal ``local``.
    On: every route but ``/healthz`` and ``/readyz`` needs a key; the key's id owns
    the sessions it creates. Keys come from ``keys``, the env var ``api_keys_env``
    (``id:sha256,id:sha256``) and ``keys_file`` (re-read when it changes), and
    from the ingress's ``user_config`` (rotation without a restart).
    """

    enabled: bool = False
    keys: list[ApiKeyEntry] = Field(default_factory=list)
    api_keys_env: str | None = Field(None, description="Env var holding 'id:sha256hex' entries, comma-separated.")
    keys_file: str | None = Field(None, description="YAML list of {id, sha256}; re-read on change.")


class LimitsConfig(Strict):
    """Per-key rate limits (the ``limits`` library): a moving window per API key id."""

    rate: str | None = Field(None, description="e.g. '20/second' or '600/minute'; None: no limit.")
    storage_url: str = Field("memory://", description="memory:// (one replica) or redis://... (shared).")
    storage_url_env: str | None = Field(None, description="Env var holding the storage URL (production).")

    @model_validator(mode="after")
    def _parses(self) -> LimitsConfig:
        if self.rate is not None:
            import limits

            try:
                limits.parse_many(self.rate)
            except ValueError as exc:
                raise ValueError(f"rate {self.rate!r} is not a limits expression (e.g. '20/second')") from exc
        return self


class StoreConfig(Strict):
    kind: Literal["sqlite", "redis"] = "sqlite"
    path: str | None = Field(None, description="SQLite file; default <cache>/sessions.db")
    url: str | None = Field(None, description="Redis URL (redis://host:port/db)")
    url_env: str | None = None
    ttl_s: float | None = Field(7 * 86400.0, gt=0, description="A session expires this long after its last turn.")
    vault_key_env: str | None = Field(None, description="Env var holding the Fernet key that seals PII vaults.")
    vault_key_file: str | None = Field(None, description="File holding that key; default <cache>/vault.key.")

    @model_validator(mode="after")
    def _needs(self) -> StoreConfig:
        if self.kind == "redis" and not (self.url or self.url_env):
            raise ValueError("a redis store needs url or url_env")
        if self.kind == "redis" and not (self.vault_key_env or self.vault_key_file):
            raise ValueError("a redis store needs vault_key_env or vault_key_file (replicas share the key)")
        return self


class AdmissionConfig(Strict):
    """Admission of whole turns in each ingress replica (:mod:`pipelines.admission`)."""

    mode: Literal["off", "adaptive"] = Field(
        "off", description="`adaptive`: at most ⌊measured turns per second × target × turn deadline⌋ turns run "
        "at once, the rest are refused at once (503 + Retry-After); `off`: only the deployment's "
        "max_ongoing_requests / max_queued_requests bound them.")
    target: float = Field(0.5, gt=0, le=1, description="The share of the turn deadline an admitted turn may "
                          "expect to take with the limit's turns running at once.")
    initial_limit: int = Field(2, ge=1, description="Turns admitted at once before the first one completed.")
    min_limit: int = Field(1, ge=1)
    max_limit: int = Field(64, ge=1)

    @model_validator(mode="after")
    def _order(self) -> AdmissionConfig:
        if not self.min_limit <= self.initial_limit <= self.max_limit:
            raise ValueError("admission: need min_limit <= initial_limit <= max_limit")
        return self


class IngressConfig(DeploymentOptions):
    """The ingress deployment's options plus what the edge enforces."""

    max_body_bytes: int = Field(65536, ge=1024, description="HTTP bodies over this are refused (413) unread.")
    max_json_depth: int = Field(16, ge=2, le=256, description="Deeper JSON bodies are refused (400).")
    sse_heartbeat_s: float = Field(10.0, gt=0, description="An SSE comment line while a turn is silent.")
    sse_refusal_window_s: float = Field(0.5, ge=0, le=30, description="An SSE turn holds its headers this "
                                        "long for a refusal (the status itself); later refusals are "
                                        "``error`` events in the 200 stream.")
    session_lock_wait_s: float = Field(10.0, ge=0, description="A second turn of a session waits this long, "
                                       "then 409 / ABORTED.")
    switch_interval_ms: float | None = Field(
        None, gt=0, le=100, description="The ingress process's thread switch interval "
        "(``sys.setswitchinterval``; Python's default is 5 ms). A turn crosses threads on its way out "
        "(Ray Serve runs the app's code on its own loop thread; the store's reads run in a thread): a thread "
        "that waits for the interpreter lock waits up to this long. None keeps Python's default.")
    admission: AdmissionConfig = Field(
        default_factory=AdmissionConfig, description="Turns admitted by measured capacity and the turn deadline "
        "(pipelines/admission.py); the deployment's queue bounds must then let the turns reach the replica.")


class TelemetryConfig(Strict):
    service_name: str = "tandem"
    jsonl_dir: str | None = Field(None, description="Trace + event JSONL dir; default <cache>/telemetry")
    otlp_endpoint: str | None = None
    sampling_ratio: float = Field(1.0, ge=0.0, le=1.0)


def add_pack_paths(paths: list[str]) -> None:
    """Put pack folders (``domain.paths``) at the front of ``sys.path`` in this process, once each."""
    import sys

    for path in reversed(paths):
        if path not in sys.path:
            sys.path.insert(0, path)


def app_runtime_env(runtime_env: dict[str, Any], pack_paths: list[str]) -> dict[str, Any]:
    """The app's ``runtime_env`` with ``pack_paths`` in front of the workers' ``PYTHONPATH``.

    Ray expands ``${PYTHONPATH}`` in a worker to the value the cluster gave it, so what was importable
    there stays importable; a ``PYTHONPATH`` the config sets itself is kept after the pack folders.
    """
    out = dict(runtime_env)
    if not pack_paths:
        return out
    env_vars = dict(out.get("env_vars") or {})
    rest = env_vars.get("PYTHONPATH", "${PYTHONPATH}")
    env_vars["PYTHONPATH"] = os.pathsep.join([*pack_paths, rest])
    out["env_vars"] = env_vars
    return out


class DomainConfig(Strict):
    """The domain pack and its world (the store the tools read and write)."""

    @model_validator(mode="after")
    def _known(self) -> DomainConfig:
        add_pack_paths(self.paths)
        try:
            pack_factory(self.name)
        except UnknownDomain as exc:
            raise ValueError(str(exc)) from None
        return self

    name: str = Field(description="An installed domain pack (entry point group `tandem.domains`).")
    paths: list[str] = Field(
        default_factory=list,
        description="Folders that hold packs installed outside the environment (`pip install --target DIR`): "
        "put on `sys.path` where the config is read and on `PYTHONPATH` of every process of the app (its "
        "`runtime_env`), so the pack's entry point resolves in the Ray workers too.")
    seed: int = Field(7, description="Seed of the synthetic world written on first start.")
    world_path: str | None = Field(None, description="SQLite world file; default <cache>/world-<name>-<seed>.db")
    dataset: str | None = Field(
        None, validation_alias=AliasChoices("dataset", "tau2_db"),
        description="A file the pack imports into an empty store instead of generating (its `new_world`); "
        "`tau2_db` is read as this too.")
    resettable: bool = Field(
        False, description="Whether the tools deployment may put its world back to the seed on request (its "
        "`reset_world` handle method; `tandem eval` sets it so that every whole task starts from the same world). "
        "Off in every profile: a reset discards every write made since the seed.")


class GuardrailsConfig(Strict):
    """Where the pre- and post-guard run."""

    placement: Literal["ingress", "deployment"] = Field(
        "ingress",
        description="`ingress`: in the ingress's own process (no handle hop on the way to a turn's first "
        "token; its table is TandemIngress's user_config `{guardrails: {table: ...}}`); `deployment`: in "
        "the GuardrailsServer CPU deployment (scaled apart from the ingress; its table is that "
        "deployment's user_config `{table: ...}`).",
    )


class RolePrice(Strict):
    """What one token of a role costs on the profile's hardware, in GPU-seconds (``tandem cost``)."""

    prefill_gpu_s_per_token: float = Field(0.0, ge=0, description="A prompt token not served from the prefix cache.")
    cached_gpu_s_per_token: float = Field(0.0, ge=0, description="A prompt token served from the prefix cache.")
    decode_gpu_s_per_token: float = Field(0.0, ge=0, description="A generated token.")


class CostConfig(Strict):
    """How ``tandem cost`` prices a turn's tokens on this profile's models (a role absent costs nothing)."""

    pricing: dict[str, RolePrice] = Field(default_factory=dict, description="Role → GPU-seconds per token.")
    gpu_hour_usd: float | None = Field(None, gt=0, description="What one GPU-hour costs; None: GPU-seconds only.")
    basis: str = Field("", description="Where the figures come from (a document, a measurement).")

    @model_validator(mode="after")
    def _roles(self) -> CostConfig:
        unknown = sorted(set(self.pricing) - set(ROLES))
        if unknown:
            raise ValueError(f"cost.pricing: unknown roles {unknown} (roles: {', '.join(ROLES)})")
        return self


class DeploymentsConfig(Strict):
    """Options of the CPU deployments that host pipeline parts."""

    tools: DeploymentOptions = Field(default_factory=lambda: DeploymentOptions(num_cpus=0.1, num_replicas=1))
    guardrails: DeploymentOptions = Field(default_factory=lambda: DeploymentOptions(num_cpus=0.1))
    rule_kernels: DeploymentOptions = Field(default_factory=lambda: DeploymentOptions(num_cpus=0.1))


class AppConfig(Strict):
    """Everything one Tandem application needs; the ``args`` of the Serve YAML entry."""

    profile: str = "embedded"
    models: dict[str, ModelDeploymentConfig]
    roles: RolesConfig
    ingress: IngressConfig = Field(default_factory=IngressConfig)
    auth: AuthConfig = Field(default_factory=AuthConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    store: StoreConfig = Field(default_factory=StoreConfig)
    telemetry: TelemetryConfig = Field(default_factory=TelemetryConfig)
    pipeline: PipelineSettings = Field(
        default_factory=TandemSettings,
        description="The turn pipeline: one settings model per kind (pipelines/registry.py), keyed by `kind`.",
    )
    domain: DomainConfig = Field(description="The domain pack served (no default: a config names it).")
    deployments: DeploymentsConfig = Field(default_factory=DeploymentsConfig)
    guardrails: GuardrailsConfig = Field(default_factory=GuardrailsConfig)
    cost: CostConfig = Field(default_factory=CostConfig, description="Token prices of this profile (tandem cost).")

    @model_validator(mode="after")
    def _domain_fits_pipeline(self) -> AppConfig:
        kind, dom = self.pipeline.kind, self.domain.name
        domains = kind_record(kind).domains
        if domains is not None and dom not in domains:
            raise ValueError(f"pipeline.kind {kind!r} runs on the {' / '.join(domains)} domain, not {dom!r}")
        return self

    @model_validator(mode="after")
    def _tools_single_replica(self) -> AppConfig:
        t = self.deployments.tools
        if t.autoscaling is not None or (t.num_replicas or 1) != 1:
            raise ValueError("deployments.tools: the tools deployment owns the world state; run exactly one replica")
        return self

    @model_validator(mode="after")
    def _roles_resolve(self) -> AppConfig:
        for role in ROLES:
            name = getattr(self.roles, role)
            if name not in self.models:
                raise ValueError(f"roles.{role} names {name!r}, which is not a key of models")
        ids = [m.model_id for m in self.models.values()]
        if len(ids) != len(set(ids)):
            raise ValueError("model_id values must be unique")
        return self

    def model_for_role(self, role: str) -> ModelDeploymentConfig:
        return self.models[getattr(self.roles, role)]


# --- the Serve file -------------------------------------------------------


class HttpOptions(Strict):
    host: str = "0.0.0.0"
    port: int = Field(8000, ge=1, le=65535)
    request_timeout_s: float | None = None
    keep_alive_timeout_s: int | None = None


class GrpcOptions(Strict):
    port: int = Field(9000, ge=1, le=65535)
    grpc_servicer_functions: list[str] = Field(default_factory=list)


def _validate_guardrail_table(user_config: dict[str, Any]) -> None:
    from pipelines.guardrails.config import load_guardrail_config

    if set(user_config) - {"table"}:
        raise ValueError(f"unknown keys {sorted(set(user_config) - {'table'})} (expected 'table')")
    load_guardrail_config(user_config["table"])


def _validate_rule_bundle(user_config: dict[str, Any], domain: str) -> None:
    from pipelines.domains import load_rule_bundle

    if set(user_config) - {"rules"}:
        raise ValueError(f"unknown keys {sorted(set(user_config) - {'rules'})} (expected 'rules')")
    load_rule_bundle(domain, user_config["rules"])


def _validate_ingress_user_config(user_config: dict[str, Any]) -> None:
    """``{auth: {keys: [{id, sha256}, ...]}, guardrails: {table: {...}}}``: API keys rotated live on the
    ingress, and the guard's rule table where the guard runs in the ingress (``guardrails.placement``)."""
    if set(user_config) - {"auth", "guardrails"}:
        raise ValueError(f"unknown keys {sorted(set(user_config) - {'auth', 'guardrails'})} "
                         "(expected 'auth', 'guardrails')")
    if "guardrails" in user_config:
        guard = user_config["guardrails"]
        if not isinstance(guard, dict) or set(guard) != {"table"}:
            raise ValueError("guardrails: expected {table: {...}} (the guard's rule table)")
        try:
            _validate_guardrail_table(guard)
        except (ValueError, ConfigError) as exc:
            raise ValueError(f"guardrails: {getattr(exc, 'message', exc)}") from exc
    auth = user_config.get("auth") or {}
    if not isinstance(auth, dict) or set(auth) - {"keys"}:
        raise ValueError("auth: only 'keys' (a list of {id, sha256}) can change live")
    try:
        [ApiKeyEntry.model_validate(k) for k in auth.get("keys") or []]
    except ValidationError as exc:
        raise ValueError(f"auth.keys: {format_validation_error(exc)}") from exc


# Deployments whose live tables arrive as Ray Serve user_config, and each one's validator.
USER_CONFIG_VALIDATORS: dict[str, Any] = {
    "GuardrailsServer": _validate_guardrail_table,
    "RuleKernels": _validate_rule_bundle,
    "TandemIngress": _validate_ingress_user_config,
}


class DeploymentUserConfig(Strict):
    """A ``deployments:`` entry of the Serve file: live rule tables only (Ray drops unknown keys; we refuse)."""

    name: str
    user_config: dict[str, Any]

    @model_validator(mode="after")
    def _table_is_known(self) -> DeploymentUserConfig:
        if self.name not in USER_CONFIG_VALIDATORS:
            raise ValueError(f"no live table for deployment {self.name!r}; known: {sorted(USER_CONFIG_VALIDATORS)}")
        return self

    def check(self, domain: str) -> None:
        """Validate the table against the application's domain (raises ValueError)."""
        check = USER_CONFIG_VALIDATORS[self.name]
        try:
            if self.name == "RuleKernels":
                check(self.user_config, domain)
            else:
                check(self.user_config)
        except ConfigError as exc:
            raise ValueError(exc.message) from exc


class ApplicationEntry(Strict):
    name: str
    route_prefix: str | None = Field("/", description="None: no HTTP route (a models application).")
    import_path: str
    runtime_env: dict[str, Any] = Field(default_factory=dict)
    args: AppConfig
    deployments: list[DeploymentUserConfig] = Field(
        default_factory=list,
        description="user_config per deployment (rule tables): a redeploy that changes only these "
        "reconfigures live replicas without restarting them.",
    )

    @model_validator(mode="after")
    def _tables_fit_domain(self) -> ApplicationEntry:
        placement = self.args.guardrails.placement
        for i, d in enumerate(self.deployments):
            try:
                if d.name == "GuardrailsServer" and placement == "ingress":
                    raise ValueError("the guard runs in the ingress (guardrails.placement: ingress): give its "
                                     "table as {name: TandemIngress, user_config: {guardrails: {table: ...}}}, "
                                     "or set guardrails.placement: deployment")
                if d.name == "TandemIngress" and "guardrails" in d.user_config and placement == "deployment":
                    raise ValueError("the guard runs in GuardrailsServer (guardrails.placement: deployment): "
                                     "give its table as {name: GuardrailsServer, user_config: {table: ...}}")
                d.check(self.args.domain.name)
            except ValueError as exc:
                raise ValueError(f"deployments.{i} ({d.name}): {exc}") from exc
        return self


class ServeFile(Strict):
    """A Ray Serve config file, validated strictly."""

    proxy_location: Literal["HeadOnly", "EveryNode", "Disabled"] = "HeadOnly"
    http_options: HttpOptions = Field(default_factory=HttpOptions)
    grpc_options: GrpcOptions = Field(default_factory=GrpcOptions)
    logging_config: dict[str, Any] | None = None
    applications: list[ApplicationEntry] = Field(..., min_length=1)


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """One line per problem, each with the dotted path of the offending key."""
    from pipelines.registry import KINDS

    lines = []
    for err in exc.errors(include_url=False):
        loc = [p for i, p in enumerate(err["loc"]) if not (i and err["loc"][i - 1] == "pipeline" and p in KINDS)]
        path = ".".join(str(p) for p in loc)
        full = f"{prefix}.{path}" if prefix and path else (prefix or path)
        kind = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{full}: {kind}")
    return "; ".join(lines)


def parse_app_config(args: dict[str, Any] | AppConfig) -> AppConfig:
    """Validate application args (what Ray passes to the builder)."""
    if isinstance(args, AppConfig):
        return args
    try:
        return AppConfig.model_validate(args)
    except ValidationError as exc:
        raise ConfigError(f"invalid app config: {format_validation_error(exc, 'args')}") from exc


def load_serve_file(path: str | Path) -> ServeFile:
    """Read and strictly validate a Serve YAML file; :class:`ConfigError` names the bad key."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config {p}: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {p} is not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"config {p} must be a mapping at the top level")
    try:
        return ServeFile.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(f"invalid config {p}: {format_validation_error(exc)}") from exc


def merge_args(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """``base`` application args with ``overrides`` deep-merged in.

    Each pipeline kind has its own settings, so an override that names a different
    ``pipeline.kind`` replaces the whole ``pipeline`` section instead of merging into
    settings the new kind does not have.
    """
    import copy

    def merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        out = copy.deepcopy(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
        return out

    over = dict(overrides)
    pipe = over.get("pipeline")
    base_kind = (base.get("pipeline") or {}).get("kind", "tandem")
    if isinstance(pipe, dict) and "kind" in pipe and pipe["kind"] != base_kind:
        out = merge({k: v for k, v in base.items() if k != "pipeline"}, {k: v for k, v in over.items() if k != "pipeline"})
        out["pipeline"] = copy.deepcopy(pipe)
        return out
    return merge(base, over)
