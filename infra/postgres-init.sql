-- Prefect keeps its own database next to the ledger's (both owned by the oomrl role).
CREATE DATABASE prefect OWNER oomrl;
