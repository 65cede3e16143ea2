"""Bytes in and out, knowing nothing of rubrics: data sets (`dataset`), what a program reads from a
row (`needs`), JSON Lines, Parquet, any filesystem (`storage`), writes that cannot destroy input
(`safeio`) and terminal-safe text (`printable`)."""
