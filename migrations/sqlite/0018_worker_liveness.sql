-- Who holds a claim: each process records, under the worker id its claims carry in `claimed_by`,
-- what tells whether it still runs: its host, PID and the kernel's boot id (a PID is only
-- meaningful within one boot of one host). `run --until-idle` reads this to take over at once the
-- claims of a process that is gone, instead of waiting out their lease.
ALTER TABLE workers ADD COLUMN host TEXT;
ALTER TABLE workers ADD COLUMN pid INTEGER;
ALTER TABLE workers ADD COLUMN boot_id TEXT;
