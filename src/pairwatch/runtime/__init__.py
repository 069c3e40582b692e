"""The process-wide pieces every channel shares: the off switch (:mod:`.switch`), the
shield that keeps pairwatch's failures from the client (:mod:`.guard`), the thread that
times out idle channels (:mod:`.sweeper`) and what a forked child renews (:mod:`.forks`)."""
