"""The co-location guard (TopoSch §4.2.2 with Koordinator's safety margins and a
slack controller): per node, how much of it batch work may see -- SLO slack decides
whether batch gives way, critical-path self time per node where and how much
(``tracing``), the latency-critical applications' demand bounds it -- acted out on the
RM's node totals (or a batch queue's maximum capacity) and served to the node agents
as reclaim requests, on the guard's own clock.

- ``model``    frozen inputs, memory and the plan (one decision per node, with reasons)
- ``slack``    the slack policy (pure): whether, where and how much
- ``decide``   the visibility decision (pure): the policies and the safety steps
- ``demand``   where the demand bound comes from (learners, or usage plus headroom)
- ``lra``      feeding the latency-critical applications' learners; their demand per node
- ``reserve``  what a node keeps for them (pure): learned, or observed until enough
               rounds, and a Cilantro policy where several share the node
- ``nodes``    the RM's node list, read at most once a period and shared
- ``observe``  the edges read: the trace store's risk, path times and QoS
- ``metricslatency`` the same reading with tail latency from the services' own histograms
- ``originals``the journal of each node's original total, written before any change
- ``follow``   which journal entries the nodes the RM lists make obsolete (pure)
- ``actuate``  acting on the RM (node totals) and putting it all back
- ``queuecap`` the other actuator: the batch queue's maximum capacity
- ``mirror``   the held totals mirrored into the RM's dynamic-resources.xml
- ``guard``    one cycle (observe -> decide -> act -> record) and the guard's state

The guard's loop inside ``serve`` is :mod:`yarn_adapt.service.guard`; how it all works
is in docs/colocation.md.
"""
