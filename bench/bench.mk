# Benchmarks: they print figures; nothing here is a pass/fail test.
bench:
	@echo "no benchmarks yet"
