-- Indexes for the node list's filtered pages at 100,000 nodes (issue 36; server/domain/nodes.ts listNodes).
--
-- A status filter sorted by last seen (the list's "online, most recently seen first") walked
-- nodes_last_seen_idx and read each node's row to test its status: page 150 of the online nodes read 15,000
-- rows, 24 ms. With the status first and the sort and tiebreak after it, the page's keys are read from this
-- index alone (1 ms). It serves `status = …` as the plain status index did, so that one goes.
CREATE INDEX nodes_status_last_seen_idx ON nodes (status, last_seen DESC NULLS LAST, name, id);
DROP INDEX nodes_status_idx;

-- An operating system filter (with or without a group, the group's members hashed against it) read every
-- node's row to test `os_name`: 3,000 pages, ~30 ms. From this index the nodes of one operating system are
-- read without their rows, and in the order of a sort by agent version (the list's version view).
CREATE INDEX nodes_os_agent_version_idx ON nodes (os_name, agent_version, name, id);

-- A policy's compliance page (server/domain/compliance.ts policyCompliance) is sorted by node name: the
-- planner either walked the node names probing each for the policy's reach (4,192 probes for page 5 of a
-- policy on 4% of the fleet) or read every node's row to hash them. With the name beside the id, the
-- policy's nodes are looked up by id without their rows and only they are sorted: 69-146 ms → 10-16 ms.
CREATE INDEX nodes_id_name_idx ON nodes (id) INCLUDE (name);
