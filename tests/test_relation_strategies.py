"""Tables drawn from the relations a schema declares (``codec.testing.strategies.tables``) satisfy them
by construction -- the relation engine finds nothing -- and breaking any one declared relation
in a drawn table makes the engine report exactly that relation's rule among its findings."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codec.engine import relations
from codec.testing.strategies import Drawn, tables
from codec.schemas import gguf, safetensors
from codec.schemas.dsl import Aligned, Disjoint, Member, NBytes, Region, Tiles, Unique

TOY = (
    Member("Row.kind", (1, 2, 5), "TOY-KIND"),
    Unique("Row.name", "TOY-NAME"),
    NBytes("Row.len", "Row.kind", "Row.shape", {1: 1, 2: 4, 5: 8}, "TOY-NBYTES"),
    Aligned("Row.at", 16, "TOY-ALIGN"),
    Region("Row.at", "Row.len", "TOY-BOUNDS", hi="$end", lo=64, rule_lo="TOY-LO"),
    Disjoint("Row.at", "Row.len", "TOY-OVERLAP"),
)
CASES = [("SAFETENSORS", safetensors.RELATIONS, "Entry"), ("GGUF", gguf.RELATIONS, "Tensor"), ("TOY", TOY, "Row")]
DECLS_OF = {table: decls for _, decls, table in CASES}
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _rules(fmt, decls, t: Drawn) -> list[str]:
    return [e.rule for e in relations.check(decls, t.context(fmt), b"").errors]


def _col(term: str) -> str:
    return term.split(".", 1)[1]


def _copy(t: Drawn) -> Drawn:
    cols = {k: (tuple(x.copy() for x in v) if isinstance(v, tuple) else
                (v.copy() if isinstance(v, np.ndarray) else list(v))) for k, v in t.columns.items()}
    return Drawn(t.table, cols, t.n, dict(t.values), t.size)


def _broken(r, t: Drawn, pick: int) -> Drawn | None:
    """``t`` with relation ``r`` broken in one row (None where it cannot be in this table)."""
    t = _copy(t)
    c, n = t.columns, t.n
    if isinstance(r, Member):
        if not n:
            return None
        c[_col(r.column)][pick % n] = max(r.values) + 1
    elif isinstance(r, Unique):
        if n < 2:
            return None
        names = c[_col(r.column)]
        names[(pick + 1) % n] = names[pick % n]
    elif isinstance(r, Aligned):
        k = r.n if isinstance(r.n, int) else (t.values.get(r.n[1:]) if r.n.startswith("$") else None)
        per = np.full(n, k, dtype=np.uint64) if k is not None else c[_col(r.n)]
        rows = [i for i in range(n) if per[i] > 1]
        if not rows:
            return None
        c[_col(r.column)][rows[pick % len(rows)]] += np.uint64(1)
    elif isinstance(r, NBytes):
        if not n:
            return None
        c[_col(r.length)][pick % n] += np.uint64(1)
    elif isinstance(r, Region):
        hi = t.values[r.hi[1:]] if isinstance(r.hi, str) and r.hi.startswith("$") else t.size
        if not n:
            return None
        a = next((x.n for x in DECLS_OF[t.table] if isinstance(x, Aligned) and x.column == r.offset), 1)
        a = t.values[a[1:]] if isinstance(a, str) else a  # (past the end, still aligned: only the bound breaks)
        c[_col(r.offset)][pick % n] = np.uint64(-(-(hi + 1) // a) * a)
    elif isinstance(r, Disjoint):
        full = [i for i in range(n) if c[_col(r.length)][i] > 0]
        if len(full) < 2:
            return None
        a, b = full[pick % len(full)], full[(pick + 1) % len(full)]
        if c[_col(r.length)][b] > c[_col(r.length)][a]:
            a, b = b, a
        c[_col(r.offset)][b] = c[_col(r.offset)][a]  # (inside a's bytes: only the overlap breaks)
    elif isinstance(r, Tiles):
        t.values[r.end[1:]] += 1  # something after the last row
        t.size += 1
    else:
        raise TypeError(r)
    return t


@pytest.mark.parametrize("fmt,decls,table", CASES, ids=[c[0] for c in CASES])
@SETTINGS
@given(data=st.data())
def test_drawn_tables_satisfy_every_declared_relation(fmt, decls, table, data):
    t = data.draw(tables(decls, table))
    assert _rules(fmt, decls, t) == []


@pytest.mark.parametrize("fmt,decls,table", CASES, ids=[c[0] for c in CASES])
@SETTINGS
@given(data=st.data())
def test_breaking_one_declared_relation_is_reported_by_its_rule(fmt, decls, table, data):
    t = data.draw(tables(decls, table))
    mine = [r for r in decls if isinstance(r, (Aligned, Disjoint, Member, NBytes, Region, Tiles, Unique))]
    r = data.draw(st.sampled_from(mine))
    bad = _broken(r, t, data.draw(st.integers(0, 50)))
    if bad is not None:
        assert r.rule in _rules(fmt, decls, bad)


def test_a_relation_the_strategy_cannot_satisfy_is_refused():
    from codec.schemas.dsl import Zeros
    with pytest.raises(TypeError, match="Zeros"):
        tables((Zeros("Row.at", "Row.len", "X"),), "Row")


def _safetensors_file(t: Drawn) -> bytes:
    """The safetensors file a drawn Entry table describes (names from the row numbers)."""
    import json
    c = t.columns
    lens, flat = c["shape"]
    starts = np.concatenate(([0], np.cumsum(lens)[:-1])).astype(int) if t.n else []
    header = {f"t{i}": {"dtype": safetensors.DTYPES.names[int(c["dtype"][i])],
                        "shape": [int(x) for x in flat[starts[i]:starts[i] + lens[i]]],
                        "data_offsets": [int(c["begin"][i]), int(c["begin"][i] + c["nbytes"][i])]} for i in range(t.n)}
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + bytes(range(256)) * (t.values["data_length"] // 256) \
        + bytes(t.values["data_length"] % 256)


@SETTINGS
@given(data=st.data())
def test_files_built_from_drawn_tables_read_and_a_broken_relation_is_refused(data):
    import codec
    t = data.draw(tables(safetensors.RELATIONS, "Entry"))
    with codec.open(_safetensors_file(t), format="safetensors") as r:
        assert len(r) == t.n
        for i in range(t.n):
            assert r.tensor(f"t{i}").nbytes == int(t.columns["nbytes"][i])
    rel = data.draw(st.sampled_from(safetensors.RELATIONS))
    bad = _broken(rel, t, data.draw(st.integers(0, 50)))
    if bad is not None:
        rep = codec.validate(_safetensors_file(bad), format="safetensors")
        assert rel.rule in [v.rule for v in rep.violations]
