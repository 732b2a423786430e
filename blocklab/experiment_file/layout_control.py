"""[design] layout_control = N: N layout variants of each reference build, run as arms.

A build at another page size is also another binary: its code lands at other addresses
(blocklab.postgres.link_order). The layout control adds, for every reference variant, N
copies that differ from it in nothing but the build's `layout_seed` (1..N: the backend
linked in an order drawn from that seed). They are ordinary variants: planned, built,
cached and balanced in the round orders like any other, each compared with its reference.
Their spread around the reference is how far code layout alone moves the workload
(blocklab.analysis.layout), against which a page-size difference is judged.
Pure: variants in, variants out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from blocklab.experiment_file.dimensions import Scalar
from blocklab.experiment_file.values import fail
from blocklab.model import Variant

KEY = "design.layout_control"


def layout_label(reference_label: str, seed: int) -> str:
    return f"{reference_label} layout{seed}"


def arms(
    variants: Sequence[Variant],
    reference_map: Mapping[str, str],
    dims_map: Mapping[str, Mapping[str, Scalar]],
    n: int,
) -> tuple[list[Variant], dict[str, str], dict[str, dict[str, Scalar]]]:
    """The variants with N layout copies of each reference after it; each copy's reference
    is the variant it copies, its dimensions the reference's and its layout_seed."""
    by_id = {v.variant_id: v for v in variants}
    refs = [by_id[r] for r in dict.fromkeys(reference_map[v.variant_id] for v in variants)]
    out_refs = dict(reference_map)
    out_dims = {k: dict(v) for k, v in dims_map.items()}
    copies: list[Variant] = []
    for ref in refs if n else []:
        if ref.build.layout_seed is not None:
            raise fail(KEY, f"{n} with a reference that is a layout variant already "
                       f"({ref.label}: layout_seed {ref.build.layout_seed})",
                       "0, or a matrix without layout_seed")  # fmt: skip
        for seed in range(1, n + 1):
            copy = ref.model_copy(
                update={
                    "build": ref.build.model_copy(update={"layout_seed": seed}),
                    "label": layout_label(ref.label or ref.variant_id, seed),
                }
            )
            copies.append(copy)
            out_refs[copy.variant_id] = ref.variant_id
            out_dims[copy.variant_id] = {**dims_map.get(ref.variant_id, {}), "layout_seed": seed}
    return [*variants, *copies], out_refs, out_dims


def hosts_with_arms(
    host_variants: Mapping[str, tuple[str, ...]],
    variants: Sequence[Variant],
    reference_map: Mapping[str, str],
) -> dict[str, tuple[str, ...]]:
    """[fleet.hosts]: a host that runs a reference runs its layout copies too."""
    copies = [v.variant_id for v in variants if v.build.layout_seed is not None]
    return {
        h: ids + tuple(c for c in copies if reference_map[c] in ids and c not in ids)
        for h, ids in host_variants.items()
    }  # fmt: skip
