"""The Experiment: a validated experiment file, its matrix expanded into labelled variants,
each with its reference and its varying dimensions."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from blocklab.experiment_file import settings as settings_mod
from blocklab.experiment_file.design import RunDesign
from blocklab.experiment_file.dimensions import Scalar
from blocklab.model import BuildRequest, Variant
from blocklab.postgres import settings_policy as policies


def default_seed(name: str) -> int:
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16)


class Experiment(BaseModel):
    """A validated experiment: its matrix expanded into labelled variants."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    name: str
    description: str = ""
    seed: int
    rounds: int
    reference: dict[str, Any] | str | None = None
    settings_policy: str = "native"
    until_ci_pct: float | None = None
    equivalence_pct: float | None = None  # [experiment] equivalence; None: the default 2 %
    max_rounds: int | None = None
    time_budget_s: float | None = None
    allow_commands: bool = False  # [experiment] allow_commands: settings that run commands
    matrix: dict[str, Any]  # normalized: dimension -> list of option JSON
    exclude: list[dict[str, Any]] = []
    variant_list: tuple[Variant, ...]
    reference_map: dict[str, str]  # variant_id -> its reference's variant_id
    dims_map: dict[str, dict[str, Scalar]]  # variant_id -> varying dimension values
    run_design: RunDesign = RunDesign()  # [design] and [placement]
    host_variants: dict[str, tuple[str, ...]] = {}  # [fleet.hosts]: host -> its variant ids
    source: str | None = None  # the experiment file, if any (not part of the identity)

    def variants(self) -> list[Variant]:
        return list(self.variant_list)

    def variants_on(self, host: str) -> list[Variant]:
        """The variants fleet host `host` runs: those [fleet.hosts] assigns it (with their
        references), or every variant for a host the table does not name."""
        mine = self.host_variants.get(host)
        return [v for v in self.variant_list if mine is None or v.variant_id in mine]

    def unplaced(self, hosts: list[str]) -> list[str]:
        """The labels of the variants none of `hosts` runs."""
        placed = {v.variant_id for h in hosts for v in self.variants_on(h)}
        return [v.label or v.variant_id for v in self.variant_list if v.variant_id not in placed]

    def command_settings(self) -> list[str]:
        """The settings of any variant that run a command or load a library
        (blocklab.experiment_file.settings.COMMAND_SETTINGS), sorted."""
        return settings_mod.command_settings(s for v in self.variant_list for s in v.settings)

    def reference_id(self) -> str:
        """The reference variant; with a grouped reference, the first group's."""
        return self.reference_map[self.variant_list[0].variant_id]

    def reference_for(self, variant: Variant | str) -> str:
        """The variant_id this variant is compared with (itself for a reference)."""
        vid = variant if isinstance(variant, str) else variant.variant_id
        return self.reference_map[vid]

    def reference_ids(self) -> list[str]:
        return list(dict.fromkeys(self.reference_map.values()))

    def dims(self, variant: Variant | str) -> dict[str, Scalar]:
        vid = variant if isinstance(variant, str) else variant.variant_id
        return dict(self.dims_map[vid])

    def effective_settings(
        self, variant: Variant, catalogue_of: Callable[[BuildRequest], policies.Catalogue | None]
    ) -> policies.Conversion | None:
        """The settings this variant's server gets under the experiment's policy (what the
        runner writes; shown by `plan`); None when the bytes policy needs the settings
        catalogue of a build not made yet (see settings_policy.for_variant)."""
        ref = self.variant(self.reference_for(variant))
        return policies.for_variant(variant, ref, catalogue_of)

    def variant(self, variant_id: str) -> Variant:
        for v in self.variant_list:
            if v.variant_id == variant_id:
                return v
        raise KeyError(variant_id)

    def to_json(self) -> dict[str, Any]:
        """Stable JSON stored with the experiment (same file -> same JSON)."""
        data: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "seed": self.seed,
            "rounds": self.rounds,
            "reference": self.reference,
            "settings_policy": self.settings_policy,
            "until_ci_pct": self.until_ci_pct,
            "max_rounds": self.max_rounds,
            "time_budget_s": self.time_budget_s,
            "matrix": self.matrix,
            "exclude": self.exclude,
            "variants": [v.variant_id for v in self.variant_list],
        }
        if self.equivalence_pct is not None:  # files without it keep their JSON
            data["equivalence_pct"] = self.equivalence_pct
        if self.allow_commands:  # files without it keep their JSON
            data["allow_commands"] = True
        if self.host_variants:  # experiments without [fleet] keep their JSON
            data["fleet_hosts"] = {h: list(ids) for h, ids in self.host_variants.items()}
        if not self.run_design.is_default():  # experiments without [design] keep their JSON
            data["design"] = self.run_design.to_json()
        return data
