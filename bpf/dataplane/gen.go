package dataplane

// The generated Go and object are committed, so building needs no clang;
// `make bpf` regenerates them and CI fails on a difference.
//go:generate go tool bpf2go -tags linux -target bpfel -type backend -type side -type control -type stats -type vip_key connect4 connect4.c -- -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
