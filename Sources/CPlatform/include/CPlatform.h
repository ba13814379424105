#ifndef CPLATFORM_H
#define CPLATFORM_H



/// Catches SIGINT and SIGTERM: the first is handed to the thread waiting in
/// ckport_wait_for_interrupt, which stops the work cleanly (roll back, remove temporary files,
/// say what happened); a second one exits at once with status 130.
void ckport_install_interrupt_handler(void);

/// Blocks until the first SIGINT or SIGTERM after ckport_install_interrupt_handler, and
/// returns its number.
int ckport_wait_for_interrupt(void);

/// Asks the kernel to start writing bytes [start, start + length) of the file to disk, without
/// waiting (Linux's sync_file_range; elsewhere nothing). Advisory: returns 0 or -1 with errno,
/// and durability still comes from fsync.
int ckport_start_writeback(int fd, long long start, long long length);

/// Waits until bytes [start, start + length) of the file are written, then lets the kernel drop
/// them from its page cache, so that a long output does not push everything else out of memory
/// nor pile up dirty pages for one long sync at the end. Advisory, as above.
int ckport_finish_writeback(int fd, long long start, long long length);

/// Gives the file `from` the name `to` unless something already has that name (then -1 with
/// errno EEXIST, and nothing changes): Linux's renameat2 with RENAME_NOREPLACE, macOS's
/// renamex_np with RENAME_EXCL. -1 with errno EINVAL, ENOSYS or ENOTSUP where the system or
/// the file system cannot do it.
int ckport_rename_exclusive(const char *from, const char *to);

#endif
