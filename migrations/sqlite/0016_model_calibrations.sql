-- What `MNEMOLOOP_MEMORY_WRITER=auto` learned of each memory model by trying it: the writer
-- its trial chose, and why. Kept so that a restart with the same model does not try it again;
-- a new version of the trial (its conversations changed) tries every model again.
CREATE TABLE model_calibrations (
  model TEXT NOT NULL,
  version INTEGER NOT NULL,
  writer TEXT NOT NULL,
  why TEXT NOT NULL,
  calibrated_at TEXT NOT NULL,
  PRIMARY KEY (model, version)
);
