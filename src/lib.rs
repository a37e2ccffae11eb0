use pgrx::prelude::*; ::pgrx::pg_module_magic!();
