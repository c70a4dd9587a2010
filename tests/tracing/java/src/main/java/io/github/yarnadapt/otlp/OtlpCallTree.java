package io.github.yarnadapt.otlp;

import io.opentelemetry.api.trace.Span;
import io.opentelemetry.api.trace.SpanBuilder;
import io.opentelemetry.api.trace.SpanKind;
import io.opentelemetry.api.trace.StatusCode;
import io.opentelemetry.context.Context;
import io.opentelemetry.exporter.otlp.http.trace.OtlpHttpSpanExporter;
import io.opentelemetry.sdk.common.CompletableResultCode;
import io.opentelemetry.sdk.resources.Resource;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.BatchSpanProcessor;
import io.opentelemetry.sdk.trace.export.SpanExporter;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * Sends requests through a multi-service call tree with the OpenTelemetry Java SDK and
 * exports their spans over OTLP/HTTP (http/protobuf, gzip) as separate services would:
 * one SdkTracerProvider per service, each with its own resource (service.name,
 * host.name), BatchSpanProcessor and OtlpHttpSpanExporter.
 *
 * <p>Usage: {@code OtlpCallTree ENDPOINT TOKEN}, the tree and the requests on standard
 * input, one tab-separated line each (times in whole microseconds, the requests' starts
 * in nanoseconds since the epoch; "-" for none):
 *
 * <pre>
 * span  NAME  SERVICE  HOST  KIND  START_US  END_US  PARENT  OPERATION
 * request  START_NS  FAILING_SPAN
 * </pre>
 *
 * Spans are listed parents first. Prints each request's trace id on a line of its own;
 * exits 0 when every export succeeded, 3 when one failed (the exporter logs why on
 * standard error), 2 on bad input.
 */
public final class OtlpCallTree {
  private static final long TIMEOUT_S = 30;
  /** Set by a failed export: BatchSpanProcessor's forceFlush succeeds all the same. */
  private static final AtomicBoolean EXPORT_FAILED = new AtomicBoolean();

  /** One span of the tree (a class, not a record: the JDK may be 11). */
  private static final class Node {
    final String name;
    final String service;
    final String host;
    final SpanKind kind;
    final long startUs;
    final long endUs;
    final String parent;
    final String operation;

    Node(String[] f) {
      name = f[1];
      service = f[2];
      host = f[3];
      kind = SpanKind.valueOf(f[4]);
      startUs = Long.parseLong(f[5]);
      endUs = Long.parseLong(f[6]);
      parent = f[7];
      operation = f[8];
    }
  }

  private static final class Request {
    final long startNs;
    final String failing;

    Request(String[] f) {
      startNs = Long.parseLong(f[1]);
      failing = f[2];
    }
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 2) {
      System.err.println("usage: OtlpCallTree ENDPOINT TOKEN < tree-and-requests");
      System.exit(2);
    }
    List<Node> tree = new ArrayList<>();
    List<Request> requests = new ArrayList<>();
    read(tree, requests);
    Map<String, SdkTracerProvider> providers = new LinkedHashMap<>();
    for (Node node : tree) {
      providers.computeIfAbsent(node.service, s -> provider(node, args[0], args[1]));
    }
    for (Request request : requests) {
      System.out.println(send(tree, providers, request));
    }
    boolean flushed = true;
    for (SdkTracerProvider provider : providers.values()) {
      flushed &= provider.forceFlush().join(TIMEOUT_S, TimeUnit.SECONDS).isSuccess();
      flushed &= provider.shutdown().join(TIMEOUT_S, TimeUnit.SECONDS).isSuccess();
    }
    System.out.flush();
    System.exit(flushed && !EXPORT_FAILED.get() ? 0 : 3);
  }

  private static void read(List<Node> tree, List<Request> requests) throws Exception {
    BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      String[] f = line.split("\t");
      if (f[0].equals("span") && f.length == 9) {
        tree.add(new Node(f));
      } else if (f[0].equals("request") && f.length == 3) {
        requests.add(new Request(f));
      } else if (!line.trim().isEmpty()) {
        System.err.println("OtlpCallTree: cannot read the line: " + line);
        System.exit(2);
      }
    }
  }

  private static SdkTracerProvider provider(Node node, String endpoint, String token) {
    Resource resource =
        Resource.builder()
            .put("service.name", node.service)
            .put("host.name", node.host)
            .build();
    OtlpHttpSpanExporter exporter =
        OtlpHttpSpanExporter.builder()
            .setEndpoint(endpoint)
            .setCompression("gzip")
            .addHeader("Authorization", "Bearer " + token)
            .setTimeout(TIMEOUT_S, TimeUnit.SECONDS)
            .build();
    return SdkTracerProvider.builder()
        .setResource(Resource.getDefault().merge(resource))
        .addSpanProcessor(BatchSpanProcessor.builder(new FailureNoting(exporter)).build())
        .build();
  }

  /** An exporter that notes its failures in EXPORT_FAILED. */
  private static final class FailureNoting implements SpanExporter {
    private final SpanExporter exporter;

    FailureNoting(SpanExporter exporter) {
      this.exporter = exporter;
    }

    @Override
    public CompletableResultCode export(Collection<SpanData> spans) {
      CompletableResultCode result = exporter.export(spans);
      result.whenComplete(
          () -> {
            if (!result.isSuccess()) {
              EXPORT_FAILED.set(true);
            }
          });
      return result;
    }

    @Override
    public CompletableResultCode flush() {
      return exporter.flush();
    }

    @Override
    public CompletableResultCode shutdown() {
      return exporter.shutdown();
    }
  }

  /** One request through the tree: each span a child of its parent's context. */
  private static String send(
      List<Node> tree, Map<String, SdkTracerProvider> providers, Request request) {
    Map<String, Span> spans = new HashMap<>();
    for (Node node : tree) {
      SpanBuilder builder =
          providers
              .get(node.service)
              .get("yarn-adapt-test")
              .spanBuilder(node.operation)
              .setSpanKind(node.kind)
              .setStartTimestamp(request.startNs + node.startUs * 1000, TimeUnit.NANOSECONDS);
      if (node.parent.equals("-")) {
        builder.setNoParent();
      } else {
        builder.setParent(Context.root().with(spans.get(node.parent)));
      }
      spans.put(node.name, builder.startSpan());
    }
    if (spans.containsKey(request.failing)) {
      spans.get(request.failing).setStatus(StatusCode.ERROR, "deadlock");
    }
    for (int i = tree.size() - 1; i >= 0; i--) {
      Node node = tree.get(i);
      spans.get(node.name).end(request.startNs + node.endUs * 1000, TimeUnit.NANOSECONDS);
    }
    return spans.get(tree.get(0).name).getSpanContext().getTraceId();
  }
}
