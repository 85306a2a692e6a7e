"""``evalloop view``: a local, read-only viewer of the history — suites, runs, any two runs compared
case by case, incidents and lessons — served on 127.0.0.1 with the static report's templates."""
