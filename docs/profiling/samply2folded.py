#!/usr/bin/env python3
"""Turn a samply profile (.json.gz) into folded stacks for inferno-flamegraph,
without the Firefox Profiler web UI.

Symbols come from either
  * the sidecar written by `samply record --unstable-presymbolicate`
    (PROFILE.json.syms.json next to PROFILE.json.gz), or
  * the profile itself, if it is already symbolicated (samply versions after
    0.13.1: `samply record --presymbolicate`), or
  * a running `samply load --no-open PROFILE` server (--server URL, the
    http://127.0.0.1:PORT/TOKEN part of the URL it prints); this also works for
    `samply import perf.data` profiles and gives correct inline frames.
    samply 0.13.1 prints the token only URL-encoded, inside the
    profiler.firefox.com link (`...127.0.0.1%3APORT%2FTOKEN%2Fprofile.json...`);
    PROFILING.md has a one-line extraction.

From the project's tool survey (shared reference notes), copied here so
that PROFILING.md's commands work from a checkout.

usage: samply2folded.py [--server URL] PROFILE.json.gz > out.folded
"""
import collections, gzip, json, sys, urllib.request

args = sys.argv[1:]
server = None
if args[:1] == ["--server"]:
    server, args = args[1].rstrip("/"), args[2:]
path = args[0]
prof = json.load(gzip.open(path) if path.endswith(".gz") else open(path))
libs = prof["libs"]
shared = prof.get("shared", {})  # newer profile format keeps the tables here
threads = [t for t in prof["threads"] if t["samples"]["length"] > 0]
for t in threads:
    for k in ("stackTable", "frameTable", "funcTable", "resourceTable", "stringArray"):
        if k not in t:
            t[k] = shared[k]
presymbolicated = bool(prof["meta"].get("symbolicated"))
for t in threads:  # newer format: delta-encoded prefixOffset (0 = root)
    st = t["stackTable"]
    if "prefix" not in st:
        st["prefix"] = [i - o if o else None for i, o in enumerate(st["prefixOffset"])]

def lib_of(th, f):
    res = th["funcTable"]["resource"][th["frameTable"]["func"][f]]
    if res is None or res < 0:
        return None
    return th["resourceTable"]["lib"][res]

resolved = {}  # (lib index, address) -> [names root->leaf]
if presymbolicated:
    pass  # funcTable names are real function names already
elif server:
    wanted = collections.defaultdict(set)
    for th in threads:
        for f in range(th["frameTable"]["length"]):
            li, a = lib_of(th, f), th["frameTable"]["address"][f]
            if li is not None and a is not None and a >= 0:
                wanted[li].add(a)
    for li, addrs in wanted.items():
        addrs = sorted(addrs)
        job = {"memoryMap": [[libs[li]["debugName"], libs[li]["breakpadId"]]],
               "stacks": [[[0, a] for a in addrs]]}
        req = urllib.request.Request(server + "/symbolicate/v5",
                                     data=json.dumps({"jobs": [job]}).encode(),
                                     headers={"Content-Type": "application/json"})
        res = json.load(urllib.request.urlopen(req))["results"][0]["stacks"][0]
        for a, fr in zip(addrs, res):
            if fr.get("function"):
                inl = [i.get("function") or "?" for i in fr.get("inlines", [])]
                resolved[(li, a)] = [fr["function"]] + inl[::-1]  # inlines: innermost first
else:
    sp = (path[:-3] if path.endswith(".gz") else path) + ".syms.json"
    syms = json.load(open(sp))
    strs = syms["string_table"]
    bylib = {d["debug_name"]: (d, dict(map(tuple, d["known_addresses"])))
             for d in syms["data"]}
    for th in threads:
        for f in range(th["frameTable"]["length"]):
            li, a = lib_of(th, f), th["frameTable"]["address"][f]
            if li is None or a is None or a < 0:
                continue
            d, known = bylib.get(libs[li]["debugName"], (None, {}))
            if a in known:
                # The sidecar keeps one inline list per *function* (from the first
                # address seen), so use the symbol name only.
                resolved[(li, a)] = [strs[d["symbol_table"][known[a]]["symbol"]]]

out = collections.Counter()
for th in threads:
    st, ft, fn, sa = th["stackTable"], th["frameTable"], th["funcTable"], th["stringArray"]
    def names(f):
        if presymbolicated:
            return [sa[fn["name"][ft["func"][f]]]]
        li, a = lib_of(th, f), ft["address"][f]
        r = resolved.get((li, a))
        if r:
            return r
        if li is not None and a is not None and a >= 0:
            return ["%s+0x%x" % (libs[li]["debugName"], a)]
        return [sa[fn["name"][ft["func"][f]]]]
    cache = {}
    def stack(s):
        if s not in cache:
            chain = []
            while s is not None and s not in cache:
                chain.append(s)
                s = st["prefix"][s]
            base = cache[s] if s is not None else th["name"]
            for t in reversed(chain):
                base = ";".join([base] + names(st["frame"][t]))
                cache[t] = base
            return base
        return cache[s]
    w = th["samples"].get("weight") or [1] * th["samples"]["length"]
    for s, n in zip(th["samples"]["stack"], w):
        if s is not None:
            out[stack(s)] += n or 1
for k, v in sorted(out.items()):
    print(k, v)
