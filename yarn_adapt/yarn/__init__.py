"""The YARN edge: everything that talks to the ResourceManager and JobHistory, or
reads and writes scheduler files. Whatever it reads it parses into frozen
:mod:`yarn_adapt.model` objects; library exceptions become the project's error tree
here, in one place each.

- ``http``: the only network seam. ``Transport`` handles timeouts, TLS, simple auth or
  SPNEGO, and retries only what is safe to retry; ``ResourceManagerEndpoints`` finds the
  active RM of an HA pair (standby redirects followed only to configured hosts). An
  untrusted certificate and a 401 (failed negotiation, or a server asking for Kerberos)
  get a one-line reason.
- ``spnego``: SPNEGO through the ``kerberos`` extra (requests-gssapi over python-gssapi
  and the system's MIT Kerberos). With a keytab, credentials come from MIT's credential
  store (``client_keytab`` and a private ``MEMORY:`` ccache), which gets new ones from
  the keytab when they expire: no ``kinit`` subprocess, no shared ticket cache, no
  change to the environment.
- ``rm`` and ``history``: typed clients for ``/ws/v1/cluster`` and ``/ws/v1/history``.
- ``parse``: JSON to model objects, in one place; it tolerates Jersey's quirks and
  rejects bodies of the wrong shape with ``YarnMalformedResponse``.
- ``observe``: one observation pass producing a ``ClusterSnapshot``; the RM must answer,
  JobHistory is optional.
- ``site``: the RM and JobHistory addresses (HA ids, ``yarn.http.policy``) and the
  scheduler file, from ``$HADOOP_CONF_DIR``.
- ``confxml``: the public entry point for scheduler files (read, validate, diff, render,
  write). Behind it, ``schedconf/``: ``xmlio`` (the lxml edge: bytes with a size cap and
  no DOCTYPE, atomic writes, whitespace-keeping edits); ``capacity_xml`` / ``fair_xml``
  (parse as Hadoop does; a rewrite patches the original, so comments and unknown
  elements survive); ``validate_capacity`` / ``validate_fair`` (YARN 3.4's own rules,
  each finding refused, ignored or advisory: ``issues``); ``diff`` (changes compared by
  meaning: ``50`` equals ``50.0``); ``mutation`` (the smallest ``<sched-conf>`` body,
  replayed in the order YARN applies it).
- ``apply/``: the appliers (docs/operations.md, "How an apply stays safe"): ``base``
  (``Applier``, ``ApplyPlan`` / ``ApplyOutcome``, ``DryRun``), ``file_applier``
  (rewrite, then refresh or await the Fair reload), ``mutation_applier`` (``PUT
  /scheduler-conf``), ``node_resource`` (``POST /nodes/{id}/resource``, the co-location
  guard's node totals), ``activation``, ``expectations`` (pure: what the RM must
  report), ``journal``, ``backup``, ``lock`` (``flock`` beside the target), ``polling``.
"""
