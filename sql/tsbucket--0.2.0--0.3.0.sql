-- tsbucket 0.2.0 -> 0.3.0 (ALTER EXTENSION tsbucket UPDATE).
-- tests/integration/test_extension_update.py checks that a database updated
-- by this script has the same schema as a fresh 0.3.0 install.

-- The worker skipped this database while its SQL was 0.2.0: make it due again.
SELECT tsbucket._extension_created();
