# cli/local.mk: the dmuon command (dispatch, option parsing, model commands).
dmuon_SOURCES += cli/dmuon.c cli/commands.h cli/opts.c cli/opts.h cli/cmd_model.c
