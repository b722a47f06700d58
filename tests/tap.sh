# tap.sh: TAP helpers for the shell tests (sourced). $DMUON is the built command.
tap_n=0
tap_fail=0
ok() { # ok DESCRIPTION COMMAND...
    desc=$1; shift
    tap_n=$((tap_n + 1))
    if "$@" >/dev/null 2>&1; then echo "ok $tap_n - $desc"; else echo "not ok $tap_n - $desc"; tap_fail=$((tap_fail + 1)); fi
}
is() { # is DESCRIPTION GOT WANT
    tap_n=$((tap_n + 1))
    if [ "$2" = "$3" ]; then echo "ok $tap_n - $1"; else
        echo "not ok $tap_n - $1"; echo "#   got:  '$2'"; echo "#   want: '$3'"; tap_fail=$((tap_fail + 1)); fi
}
like() { # like DESCRIPTION TEXT SUBSTRING
    tap_n=$((tap_n + 1))
    case "$2" in *"$3"*) echo "ok $tap_n - $1" ;; *)
        echo "not ok $tap_n - $1"; echo "#   '$3' not found in:"; printf '%s\n' "$2" | sed 's/^/#   /' | head -20
        tap_fail=$((tap_fail + 1)) ;; esac
}
like_todo() { # like_todo DESCRIPTION TEXT SUBSTRING REASON: a known gap (TAP TODO: XFAIL, XPASS once fixed)
    tap_n=$((tap_n + 1))
    case "$2" in *"$3"*) echo "ok $tap_n - $1 # TODO $4" ;; *) echo "not ok $tap_n - $1 # TODO $4" ;; esac
}
status_of() { "$@" >/dev/null 2>&1; echo $?; }
tap_end() { echo "1..$tap_n"; [ $tap_fail -eq 0 ]; }
