"""Request tracing for latency-critical services (TopoSch §4.1-4.2.1).

Deployed on its own: a library inside each service (instrumentation and exporter) and an
ingest worker (``python -m tracing ingest``). It depends on redis, networkx and numpy
only, and never imports yarn-adapt. yarn-adapt's decision code reads
:class:`tracing.model.RiskSnapshot` (stdlib-only module) and nothing else from here.

observe (the services)
    ``tracer`` (spans, the span in progress), ``context`` (W3C traceparent), ``wsgi`` /
    ``asgi`` (server spans), ``requests_hook`` (client spans), ``exporter`` (bounded,
    non-blocking, batches to a Redis stream; format in ``wire``).
receive (beside the worker, for OpenTelemetry SDKs and Collectors)
    ``receiver`` (the OTLP/HTTP receiver, ``POST /v1/traces``), ``otlp_decode`` (a
    request to ``Span`` objects, as the importers map OTLP), ``receiver_process`` (the receiver
    in processes of its own, on one address with SO_REUSEPORT).
store (the worker)
    ``ingest`` (consumer group, quiet-period assembly, at-least-once, idempotent),
    ``batch`` (decoding), ``clocks`` (spans from a clock running ahead, moved back),
    ``columns`` (assembly into columns), ``segment`` (the stored form, with its names),
    ``names`` (interned names), ``store`` (segments by time window, merging, retention,
    budget, dead letters), ``redisconn`` (connection, keys, error translation),
    ``memstore`` (the same reads over spans written in this process: the demo's store).
import
    ``importers`` (OTLP/JSON, Jaeger JSON, Zipkin v2 JSON, Alibaba call graphs).
model and decide (pure)
    ``model`` (Span, CriticalPath, RiskSnapshot), ``forest`` (one rooted tree per trace:
    orphans, cycles, virtual roots), ``fastpath`` (every trace's critical path with
    numpy), ``graph`` (the networkx reference, topology), ``risk`` (eqs. 4-8),
    ``analysis`` (window -> paths -> risk), ``tree`` (parent links as arrays: depths,
    top ancestors, cycle cuts), ``npkit`` (numpy counting helpers), ``convert`` (spans
    to columns and back without Redis).
``errors``
    the package's own small error tree; ``yarn_adapt/cli/trace.py`` maps it onto
    yarn-adapt's. How it all works: docs/colocation.md, "Inside the tracing package".
"""
