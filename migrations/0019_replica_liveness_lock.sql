-- A replica that holds its liveness lock says so (issue 32).
--
-- A replica takes a PostgreSQL session-level advisory lock keyed by its id on a connection of its own and keeps
-- it while it runs; PostgreSQL frees it the moment the process dies (kill -9 included). Another replica, or the
-- same server starting again, that can take the lock knows the holder is gone and marks its nodes offline at
-- once instead of after the replica timeout. Replicas of earlier versions hold no such lock: their rows keep
-- `false` here and are judged by the timeout alone, so a rolling upgrade never reaps a live replica.

ALTER TABLE server_replicas ADD COLUMN liveness_lock boolean NOT NULL DEFAULT false;
