"""AEROSET over HTTP Range requests against plain Range loops, measured in the same run on a
private loopback nginx (``tests.servers.Nginx``; warm page cache, medians of interleaved reps).

    .venv/bin/python benchmarks/bench_aeroset.py            # full: a ~256 MiB set in 76 tensors
    .venv/bin/python benchmarks/bench_aeroset.py --quick    # smoke test: ~28 MiB
    .venv/bin/python benchmarks/bench_aeroset.py --out benchmarks/results/aeroset.md

The set is a small transformer-shaped model, float32: embeddings and LM head (32 MiB each),
4 layers of attention (4 MiB matrices) and MLP (16 MiB matrices), and 50 small tensors (norms,
biases, q/k norms of 256 B - 16 KiB) between them, in model order -- the small ones are what
coalescing is for.  It is written once with ``write_aeroset(max_shard_bytes=64 MiB,
max_part_shards=2)`` (hash_b3 on every tensor) and served by nginx (sendfile, keep-alive).

Contenders (every one starts from nothing: new client, new connections):

* modelcodec ``AeroSet(url, cache=False).read_tensors(all)``  -- open (index JSON, index.aero,
  each part's control region) + every tensor, hash_b3 verified;
* the same with a fresh empty disk cache (includes writing it), and warm from that cache;
* modelcodec tensor by tensor: ``s.tensor(name)`` for every name (no coalescing);
* the same as the first, ``verify=False`` (extra: what hash_b3 costs);
* peer: a ``requests.Session`` with one ``Range: bytes=a-b`` GET per tensor, in the same order,
  body into memory, no hashing (offsets from the set opened locally);
* peer "raw limit": every part's whole byte range in 64 MiB Range requests on 8 threads with
  urllib3, no checks, no hashing (what the wire and nginx can do here).

Every timed call's result is checked outside the timing (before the next call): each tensor's
bytes, dtype and shape against the source arrays (modelcodec, plain loop), the parts' bytes
against the files (raw limit); the HTTP requests of every call are counted from nginx's access
log and cross-checked against ``s.store.http.stats``.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # repo root: codec, tests
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))                   # _harness

import requests  # noqa: E402
import urllib3  # noqa: E402

import _harness as H  # noqa: E402
from tests.servers import Nginx  # noqa: E402

RAW_PIECE = 64 * H.MiB
RAW_THREADS = 8


def plain_sha256(path: str) -> str:
    """A file's sha256 the plain way: hashlib over 16 MiB reads."""
    import hashlib
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(16 * H.MiB):
            h.update(b)
    return h.hexdigest()


def sha256sum(paths: list[str]) -> list[str]:
    out = subprocess.run(["sha256sum", *paths], check=True, capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines()]


# ----------------------------------------------------------------------------- inputs
def make_model(hidden: int, layers: int = 4, vocab: int = 8192, seed: int = 0) -> dict[str, np.ndarray]:
    """A transformer-shaped float32 model in model order (small tensors between the big ones).
    hidden=1024: 2 x 32 MiB (embeddings, head), 16 x 4 MiB (attention), 8 x 16 MiB (MLP) and
    50 small tensors (256 B - 16 KiB): 256.2 MiB in 76 tensors."""
    head_dim = 64
    shapes: list[tuple[str, tuple[int, ...]]] = [("model.embed_tokens.weight", (vocab, hidden))]
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes += [(p + "input_layernorm.weight", (hidden,)), (p + "input_layernorm.bias", (hidden,))]
        for m in "qkv":
            shapes += [(p + f"self_attn.{m}_proj.weight", (hidden, hidden)),
                       (p + f"self_attn.{m}_proj.bias", (hidden,))]
        shapes += [(p + "self_attn.q_norm.weight", (head_dim,)), (p + "self_attn.k_norm.weight", (head_dim,)),
                   (p + "self_attn.o_proj.weight", (hidden, hidden)), (p + "self_attn.o_proj.bias", (hidden,)),
                   (p + "post_attention_layernorm.weight", (hidden,)),
                   (p + "post_attention_layernorm.bias", (hidden,)),
                   (p + "mlp.up_proj.weight", (4 * hidden, hidden)), (p + "mlp.up_proj.bias", (4 * hidden,)),
                   (p + "mlp.down_proj.weight", (hidden, 4 * hidden)), (p + "mlp.down_proj.bias", (hidden,))]
    shapes += [("model.norm.weight", (hidden,)), ("model.norm.bias", (hidden,)), ("lm_head.weight", (vocab, hidden))]
    rng = np.random.default_rng(seed)
    data = rng.standard_normal(sum(int(np.prod(s)) for _, s in shapes), dtype=np.float32)
    out, off = {}, 0
    for name, s in shapes:
        n = int(np.prod(s))
        out[name] = data[off:off + n].reshape(s)
        off += n
    return out


def fmt_size(n: int) -> str:
    for unit, k in (("MiB", H.MiB), ("KiB", 1024)):
        if n >= k:
            return f"{n / k:g} {unit}"
    return f"{n} B"


def u8(a) -> np.ndarray:
    return np.asarray(a).reshape(-1).view(np.uint8)


# ----------------------------------------------------------------------------- contenders
def mc_read_all(url: str, cache, verify: bool = True):
    """modelcodec: open the set at ``url`` and read every tensor with one read_tensors call."""
    from codec.io.cache import RangeCache
    from codec.formats.aeroset import AeroSet
    rc = RangeCache(cache) if cache else None
    s = AeroSet(url, cache=rc if rc is not None else False)
    try:
        out = s.read_tensors(list(s.tensors), verify=verify, progress=False)
        stats = dict(s.store.http.stats)
    finally:
        s.close()
    return {"arrays": out, "http": stats, "cache": dict(rc.stats) if rc is not None else None}


def mc_one_by_one(url: str):
    """modelcodec: s.tensor(name) for every name (one read per tensor, no coalescing)."""
    from codec.formats.aeroset import AeroSet
    s = AeroSet(url, cache=False)
    try:
        out = {n: s.tensor(n) for n in s.tensors}
        stats = dict(s.store.http.stats)
    finally:
        s.close()
    return {"arrays": out, "http": stats, "cache": None}


def mc_open_only(url: str):
    """modelcodec: open + resolve every tensor (index JSON, index.aero, every part's control
    region), no tensor bytes: the fixed cost inside the read rows."""
    from codec.formats.aeroset import AeroSet
    s = AeroSet(url, cache=False)
    try:
        for n in s.tensors:
            s.tensors[n]
        return dict(s.store.http.stats)
    finally:
        s.close()


def plain_loop(plan: list[tuple[str, str, int, int]]):
    """Peer: one ``Range`` GET per tensor with a requests.Session, body into memory."""
    out = {}
    with requests.Session() as sess:
        for name, url, off, n in plan:
            r = sess.get(url, headers={"Range": f"bytes={off}-{off + n - 1}"})
            if r.status_code != 206:
                raise SystemExit(f"plain loop: HTTP {r.status_code} for {url} {off}+{n}")
            out[name] = r.content
    return {"bodies": out, "requests": len(plan)}


def raw_limit(parts: list[tuple[str, int]]):
    """Peer: every part whole, 64 MiB Range requests on 8 threads (urllib3), no checks.  Bodies
    go straight from the socket into uninitialised buffers (``np.empty``) through the response's
    underlying ``http.client`` reader: urllib3's own ``readinto`` reads into a temporary bytes
    object of the whole size and copies it, which would make this "limit" slower than the client
    it is meant to bound."""
    pool = urllib3.PoolManager(maxsize=RAW_THREADS, headers={"Accept-Encoding": "identity"})
    jobs = [(url, a, min(RAW_PIECE, size - a)) for url, size in parts for a in range(0, size, RAW_PIECE)]
    bufs = [np.empty(n, np.uint8) for _, _, n in jobs]

    def get(job, buf):
        url, a, n = job
        r = pool.request("GET", url, headers={"Range": f"bytes={a}-{a + n - 1}"}, preload_content=False)
        readinto = getattr(getattr(r, "_fp", None), "readinto", None) or r.readinto
        mv, got = memoryview(buf), 0
        while got < n:
            k = readinto(mv[got:])
            if not k:
                break
            got += k
        r.release_conn()
        return got

    with ThreadPoolExecutor(RAW_THREADS) as ex:
        got = list(ex.map(get, jobs, bufs))
    pool.clear()
    return {"jobs": jobs, "bufs": bufs, "got": got, "requests": len(jobs)}


def start_nginx(root: str) -> Nginx:
    """tests.servers.Nginx, started; a start that loses a race (pid file) is retried."""
    for attempt in range(3):
        try:
            return Nginx(root).start()
        except RuntimeError as e:
            if attempt == 2:
                raise
            print(f"# nginx did not start ({str(e).splitlines()[-1][:120]}); retrying", file=sys.stderr)


# ----------------------------------------------------------------------------- checks
def check_arrays(key: str, out: dict, tensors: dict) -> None:
    if list(out) != list(tensors) and set(out) != set(tensors):
        raise SystemExit(f"{key}: returned {len(out)} tensors, expected {len(tensors)}")
    for name, src in tensors.items():
        a = out[name]
        if a.dtype != src.dtype or a.shape != src.shape or not np.array_equal(u8(a), u8(src)):
            raise SystemExit(f"{key}: tensor {name!r} differs from its source "
                             f"({a.dtype}{a.shape} vs {src.dtype}{src.shape})")


def check_bodies(key: str, bodies: dict, tensors: dict) -> None:
    for name, src in tensors.items():
        b = bodies.get(name)
        if b is None or len(b) != src.nbytes or not np.array_equal(np.frombuffer(b, np.uint8), u8(src)):
            raise SystemExit(f"{key}: the body for {name!r} differs from the tensor's bytes")


def check_raw(key: str, res: dict, files: dict[str, bytes]) -> None:
    for (url, a, n), buf, got in zip(res["jobs"], res["bufs"], res["got"]):
        if got != n or not np.array_equal(buf, np.frombuffer(files[url], np.uint8, n, a)):
            raise SystemExit(f"{key}: {url} bytes {a}+{n} differ from the file ({got} bytes received)")


def summarize(entries: list[dict]) -> dict:
    bad = [e for e in entries if e["status"] not in (200, 206)]
    if bad:
        raise SystemExit(f"nginx answered {bad[0]['status']} to {bad[0]['uri']} {bad[0]['range']}")
    return {"requests": len(entries), "range": sum(1 for e in entries if e["range"]),
            "plain": sum(1 for e in entries if not e["range"]), "bytes": sum(e["bytes"] for e in entries),
            "connections": len({e["connection"] for e in entries}),
            "uris": sorted({e["uri"] for e in entries if not e["range"]}),
            "runs": data_runs(entries)}


def data_runs(entries: list[dict]) -> list[int]:
    """Sizes of the byte runs read with Range requests not starting at byte 0 (tensor data, not
    a file's control region), pieces of one run (split at 64 MiB) merged back."""
    spans = sorted((e["uri"], int(a), int(b)) for e in entries if e["range"] and e["status"] == 206
                   for a, b in [e["range"].split("=", 1)[1].split("-")] if int(a) > 0)
    runs: list[list] = []
    for uri, a, b in spans:
        if runs and runs[-1][0] == uri and runs[-1][2] + 1 == a:
            runs[-1][2] = b
        else:
            runs.append([uri, a, b])
    return [b - a + 1 for _, a, b in runs]


# ----------------------------------------------------------------------------- main
def main(argv=None) -> int:
    args = H.parse_args(__doc__.splitlines()[0], argv)
    codec = H.import_codec(args.codec_root)
    from codec.formats.aeroset import AeroSet, write_aeroset
    from codec.io.integrity import blake3_bytes
    from codec.io.links import digest_file
    from codec.schemas.aeroset import FILES

    t_start = time.perf_counter()
    hidden, shard_cap = (256, 8 * H.MiB) if args.quick else (1024, 64 * H.MiB)
    part_shards = 2
    reps = args.reps
    env = H.env_info(("numpy", "blake3", "urllib3", "requests", "modelcodec"))
    env["nginx"] = subprocess.run(["nginx", "-v"], capture_output=True, text=True).stderr.strip().split("/")[-1]
    codec_dir = os.path.dirname(os.path.dirname(os.path.abspath(codec.__file__)))
    env["codec under test"] = codec_dir + " @ " + H.git_state(codec_dir)
    watch = H.LoadWatch()
    watch.sample("start")
    print("# environment: " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    table = H.Table("AEROSET")

    with H.workdir(args.workdir, args.keep) as wd:
        print(f"# generating the model (hidden {hidden}) ...", flush=True)
        tensors = make_model(hidden)
        payload = sum(a.nbytes for a in tensors.values())
        small = [a.nbytes for a in tensors.values() if a.nbytes < 64 * 1024]
        mats = [a.nbytes for a in tensors.values() if a.nbytes >= 64 * 1024]
        mib = payload / H.MiB
        set_dir = os.path.join(wd, "set")
        t0 = time.perf_counter()
        write_aeroset(set_dir, tensors, model_name="bench", architecture="llama", max_shard_bytes=shard_cap,
                      max_part_shards=part_shards, uuid=b"\0" * 16, progress=False)
        t_write = time.perf_counter() - t0
        files = {}
        with AeroSet(set_dir) as local:
            names = list(local.tensors)
            if names != list(tensors):
                raise SystemExit("the set lists its tensors in another order than they were written")
            infos = {n: local.tensors[n] for n in names}
            part_refs = list(local.index["parts"])
        for p in sorted(os.listdir(set_dir)):
            H.warm(os.path.join(set_dir, p))
        params = {"mode": "quick" if args.quick else "full",
                  "tensors": f"{len(tensors)} float32 in model order: {len(mats)} matrices of "
                             f"{fmt_size(min(mats))}-{fmt_size(max(mats))}, {len(small)} norms/biases of "
                             f"{fmt_size(min(small))}-{fmt_size(max(small))}",
                  "payload": f"{mib:.1f} MiB", "max_shard_bytes": f"{shard_cap // H.MiB} MiB",
                  "max_part_shards": part_shards, "parts": len(part_refs),
                  "set write": f"{t_write:.1f} s (once, untimed)", "timed reps": reps,
                  "server": "nginx on 127.0.0.1 (1 worker, sendfile, keep-alive)",
                  "page cache": "warm (set files read once; 1 untimed warm-up round)"}
        print(f"# set: {len(part_refs)} parts, {mib:.1f} MiB in {len(tensors)} tensors; write {t_write:.1f} s",
              flush=True)

        ngx = start_nginx(set_dir)
        try:
            url = ngx.url + "/model.aeroset.json"

            def part_url(path: str) -> str:
                return ngx.url + "/" + os.path.relpath(path, set_dir).replace(os.sep, "/")

            plan = [(n, part_url(infos[n].extra["part"]), infos[n].offset, infos[n].nbytes) for n in names]
            parts = [(ngx.url + "/" + p["path"], p["size_bytes"]) for p in part_refs]
            for u, _ in parts:
                with open(os.path.join(set_dir, u.rsplit("/", 1)[1]), "rb") as f:
                    files[u] = f.read()
            cache_b = os.path.join(wd, "cache-fresh")
            cache_c = os.path.join(wd, "cache-warm")

            # -------------------------------------------------------- the warm cache for row C
            first = mc_read_all(url, cache_c)
            check_arrays("fill the warm cache", first["arrays"], tensors)
            first = None

            counts: dict[str, list[dict]] = {}
            client: dict[str, list[dict]] = {}
            pending: list = []
            mark = [ngx.mark()]

            def stash(key, fn):
                def call():
                    pending.append((key, fn()))
                return call

            def drain() -> None:
                """Check the previous call's result and count its requests (outside the timing)."""
                while pending:
                    key, res = pending.pop()
                    entries = ngx.since(mark[0])
                    s = summarize(entries)
                    counts.setdefault(key, []).append(s)
                    if "arrays" in res:
                        check_arrays(key, res["arrays"], tensors)
                        st = res["http"]
                        client.setdefault(key, []).append(st)
                        if (st.get("requests", 0), st.get("range_requests", 0), st.get("bytes", 0)) != \
                                (s["requests"], s["range"], s["bytes"]) or st.get("retries", 0):
                            raise SystemExit(f"{key}: client stats {st} disagree with nginx's log {s}")
                        if res["cache"] is not None:
                            client.setdefault(key + ":cache", []).append(res["cache"])
                    elif "bodies" in res:
                        check_bodies(key, res["bodies"], tensors)
                        if s["requests"] != res["requests"]:
                            raise SystemExit(f"{key}: {res['requests']} requests sent, nginx logged {s}")
                    else:
                        check_raw(key, res, files)
                        if s["requests"] != res["requests"]:
                            raise SystemExit(f"{key}: {res['requests']} requests sent, nginx logged {s}")
                    res = None

            def setup() -> None:
                drain()
                shutil.rmtree(cache_b, ignore_errors=True)  # row B starts from an empty cache
                os.sync()  # row B's cache writes reach the disk here, not inside the next timing
                mark[0] = ngx.mark()

            contenders = {
                "A": stash("A", lambda: mc_read_all(url, None)),
                "B": stash("B", lambda: mc_read_all(url, cache_b)),
                "C": stash("C", lambda: mc_read_all(url, cache_c)),
                "D": stash("D", lambda: mc_one_by_one(url)),
                "A_noverify": stash("A_noverify", lambda: mc_read_all(url, None, verify=False)),
                "plain": stash("plain", lambda: plain_loop(plan)),
                "raw": stash("raw", lambda: raw_limit(parts)),
            }
            print(f"# timing {len(contenders)} contenders x {reps} reps (+1 warm-up), interleaved", flush=True)
            t = H.compare(contenders, reps=reps, setup=setup)
            setup()
            watch.sample("after reads")

            # -------------------------------------------------------- where the time goes
            t_open = H.compare({"open": lambda: mc_open_only(url)}, reps=reps)["open"]
            open_stats = mc_open_only(url)
            views = [np.frombuffer(u8(a), np.uint8) for a in tensors.values()]
            t_hash = H.compare({"hash": lambda: [blake3_bytes(v) for v in views]}, reps=reps)["hash"]
            views = None
            # every part's sha256, as validate --full and mirror take it (the index records them)
            part_files = [os.path.join(set_dir, p["path"]) for p in part_refs]
            sha = {"ours": lambda: [digest_file(FILES, p)[0] for p in part_files],
                   "plain": lambda: [plain_sha256(p) for p in part_files],
                   "sha256sum": lambda: sha256sum(part_files)}
            got = {k: f() for k, f in sha.items()}
            if len({tuple(v) for v in got.values()}) != 1 or got["ours"] != [p["sha256"] for p in part_refs]:
                raise SystemExit(f"the sha256 contenders disagree: {got}")
            t_sha = H.compare(sha, reps=reps)
            # the whole local set checked: each file's sha256 on its own thread while its AERO check reads it

            def validate_local():
                with AeroSet(set_dir) as here:
                    rep = here.validate(full=True, progress=False)
                if not rep.ok:
                    raise SystemExit(f"validate(full=True) of the set just written: {rep.violations[:3]}")
            files_all = part_files + [os.path.join(set_dir, "index.aero")]
            t_val = H.compare({"ours": validate_local, "sha": lambda: [plain_sha256(p) for p in files_all]}, reps=reps)
            watch.sample("end")
        finally:
            ngx.stop()

        # ------------------------------------------------------------ sanity of the counts
        def one(key: str, field: str = "requests") -> int:
            vals = {c[field] for c in counts[key]}
            if len(vals) != 1:
                raise SystemExit(f"{key}: the {field} count changed between runs: {sorted(vals)}")
            return vals.pop()

        # (a warm cache still reads each part's control region: control data is used only once it is
        # verified against the index's hashes, and it is never cached -- the chain of trust)
        if one("C", "range") != len(part_refs) or one("C", "plain") != 1 \
                or counts["C"][0]["uris"] != ["/model.aeroset.json"]:
            raise SystemExit(f"warm cache: expected the index JSON GET and one Range per part (its control "
                             f"region), nginx logged {counts['C'][0]}")
        cstats = client["C:cache"]
        if any(c.get("misses", 0) != len(part_refs) or c.get("corrupt", 0) for c in cstats):
            raise SystemExit(f"warm cache: misses other than the parts' control regions, or corrupt entries {cstats}")
        bstats = client["B:cache"]

        # ------------------------------------------------------------ rows
        P = t["plain"]
        peer = f"requests.Session, 1 Range GET per tensor ({len(plan)} requests)"

        def thr(x: float) -> str:
            return f"{mib / x:,.0f} MiB/s"

        def req(key: str) -> str:
            c = counts[key][0]
            return f"{c['requests']} request{'s' if c['requests'] != 1 else ''}: {c['plain']} GET + {c['range']} Range"

        rows = [
            ("A", "AeroSet(url, cache=False).read_tensors(all), cold, no disk cache, incl. open"),
            ("B", "same, disk cache on (fresh empty RangeCache: fetch + write the cache)"),
            ("C", "same, warm disk cache (tensor bytes from the cache; one Range per part: its control region)"),
            ("D", "tensor by tensor: s.tensor(name) for every name, cache=False"),
            ("A_noverify", "read_tensors(all, verify=False), no disk cache (extra: without the hash_b3 check)"),
        ]
        for key, what in rows:
            table.add(H.Row(what, t[key].median, peer, P.median, best=t[key].best, peer_best=P.best,
                            note=f"{thr(t[key].median)}; {req(key)}"))
        R = t["raw"]
        raw_peer = f"raw limit: parts whole, {RAW_PIECE // H.MiB} MiB Ranges on {RAW_THREADS} threads (urllib3)"
        for key, what in (("A", "read_tensors(all), cold, no disk cache (peer, extra)"),
                          ("A_noverify", "read_tensors(all, verify=False) (peer, extra)"),
                          ("plain", "(peer vs peer) plain sequential Range loop")):
            table.add(H.Row(what, t[key].median, raw_peer, R.median, best=t[key].best, peer_best=R.best,
                            note=thr(t[key].median)))
        for key, what in (("A", "HTTP requests, read_tensors(all), cold"),
                          ("B", "HTTP requests, read_tensors(all), fresh disk cache"),
                          ("C", "HTTP requests, read_tensors(all), warm disk cache"),
                          ("D", "HTTP requests, tensor by tensor")):
            table.add(H.Row(what, one(key), "plain Range loop", len(plan), unit="req", note=req(key)))
        table.add(H.Row("open only: AeroSet(url) + resolve every tensor, no tensor bytes (breakdown)",
                        t_open.median, best=t_open.best,
                        note=f"{open_stats['requests']} requests: 1 GET + {open_stats['range_requests']} Range, "
                             f"{open_stats['bytes'] / 1024:.0f} KiB"))
        table.add(H.Row("blake3_bytes of every tensor in memory, as verify=True does (breakdown)",
                        t_hash.median, best=t_hash.best, note=thr(t_hash.median)))
        part_mib = sum(p["size_bytes"] for p in part_refs) / H.MiB
        table.add(H.Row("validate(full=True) of the set here: every file's sha256 and full AERO check (every chunk "
                        "hash, every hash_b3)", t_val["ours"].median, "hashlib.sha256 of every file over 16 MiB reads "
                        "alone", t_val["sha"].median, best=t_val["ours"].best, peer_best=t_val["sha"].best))
        for peer, key in (("hashlib.sha256 over 16 MiB reads", "plain"), ("sha256sum (coreutils)", "sha256sum")):
            table.add(H.Row("sha256 of every part file whole, as validate --full and mirror check them "
                            "(links.digest_file)", t_sha["ours"].median, peer, t_sha[key].median,
                            best=t_sha["ours"].best, peer_best=t_sha[key].best,
                            note=f"{part_mib / t_sha['ours'].median:,.0f} MiB/s"))

        a_ = counts["A"][0]
        table.notes += [
            "Times are medians of the timed repetitions (contenders interleaved A B C ..., order reversed every "
            "other round, 1 untimed warm-up round first); 'best' is the minimum. Ratio = modelcodec / peer. "
            "No targets: every row is informational.",
            "Every modelcodec row starts from nothing (new AeroSet, new connections) and includes the open: the "
            "index JSON GET, index.aero and each part's control region (header, TOC, string table, TIDX; one "
            "Range request each), then the tensors. The plain loop is handed the offsets (read beforehand from "
            "the set opened locally) and does not open anything; the raw limit reads the parts whole.",
            f"Request counts come from nginx's access log between marks and equal the client's own "
            f"Http.stats (requests, range_requests, bytes; retries 0) in every run; they are the same in every "
            f"rep. Cold read_tensors(all): {a_['requests']} requests on {a_['connections']} connections, "
            f"{a_['bytes'] / H.MiB:.1f} MiB of bodies for {mib:.1f} MiB of tensors (coalescing reads the "
            f"whole of each part's data region; runs are split at 64 MiB and fetched on 8 threads).",
            f"Disk cache: fresh = empty RangeCache directory per run (deleted and `sync`ed before each run, "
            f"outside the timing; entries are not fsynced, by design): {bstats[0].get('writes', 0)} entries "
            f"written per run. Warm = a cache filled once beforehand: {cstats[0].get('hits', 0)} hits, "
            f"0 misses per run; only the index JSON is fetched. Cache hits are checked with the entry's own "
            f"BLAKE3, not hash_b3.",
            "Checks, outside the timing: every tensor's bytes, dtype and shape that each modelcodec call and "
            "each plain-loop call returned are compared with the source arrays; the raw limit's buffers with "
            "the part files. No run returned a wrong byte.",
            "Breakdown rows: 'open only' is the fixed cost of opening a set remotely; 'blake3_bytes' is the "
            "hash_b3 check of all tensors from memory (2 cores; blake3 AUTO threads for tensors >= 1 MiB), "
            "which verify=True runs on the client's threads as the runs arrive.",
        ]
        data_jobs = a_["range"] - 1 - len(part_refs)  # minus index.aero and one open read per part
        rounds = {"A": 3 + -(-data_jobs // 8), "D": counts["D"][0]["requests"], "plain": len(plan)}
        rtt = 0.02
        table.notes.append(
            f"Round trips (arithmetic, not measured): loopback answers in ~0.1 ms, so here coalescing saves "
            f"requests more than time. read_tensors(all) waits for about {rounds['A']} round trips one after "
            f"another (index JSON, index.aero, the {len(part_refs)} parts' control regions -- read in "
            f"parallel -- then all runs in parallel); tensor by tensor waits for {rounds['D']}, the plain "
            f"loop for {rounds['plain']}. At a {rtt * 1e3:.0f} ms round trip that is ~{rounds['A'] * rtt:.2f} s "
            f"vs ~{rounds['D'] * rtt:.1f} s and ~{rounds['plain'] * rtt:.1f} s of waiting before bandwidth counts.")
        tb = t["B"]
        if max(tb.times) > 1.5 * tb.best:
            table.notes.append(
                f"The fresh-cache row varies widely ({', '.join(f'{x * 1e3:.0f}' for x in tb.times)} ms): in slow "
                f"runs of an exploratory profile (timers around RangeCache.put) the extra time went to writing "
                f"the entry files, not to the transfer; 'best' is closer to the steady state.")
        rep_all = {k: f"{thr(v.median)}" for k, v in t.items()}
        table.notes.append("Throughput (payload / median time): " +
                           ", ".join(f"{k} {v}" for k, v in rep_all.items()) + ".")

    elapsed = time.perf_counter() - t_start
    report = H.render(f"AEROSET over HTTP benchmark ({params['mode']})", table, env, watch, params, elapsed)
    H.publish(report, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
