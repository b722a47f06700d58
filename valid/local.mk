# valid/local.mk: trust in the simulator and speed over time, as libraries the commands call:
# compare (simulated against measured traces), calibrate (cost-model inputs from measurements,
# the calibration file), validate (executor and simulator on the same plans, and replays of
# stored measurements) and regress (regression benchmarks against traces/baselines/).
libdmuon_a_SOURCES += valid/compare.c valid/compare.h valid/calib.c valid/calib.h \
	valid/validate.c valid/validate.h valid/regress.c valid/regress.h
EXTRA_DIST += valid/run_device.sh
