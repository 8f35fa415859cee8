"""The data directory is owner-only: created so, and tightened when found looser."""

import os
import stat

from twisted.trial.unittest import SynchronousTestCase

from orchd.app.datadir import DataDirError, restrict_umask, secure_data_dir


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


class SecureDataDirTests(SynchronousTestCase):
    """L{secure_data_dir} creates or corrects the data dir and its store."""

    def test_creates_owner_only(self):
        """A missing data dir is created 0700, with nothing to report."""
        path = os.path.join(self.mktemp(), "data")
        self.assertEqual(secure_data_dir(path), [])
        self.assertEqual(mode(path), 0o700)

    def test_loose_tree_is_tightened(self):
        """0755 directories and 0644 files of an old store become 0700 and 0600, reported."""
        data = self.mktemp()
        store = os.path.join(data, "store")
        os.makedirs(os.path.join(store, "sub"))
        for directory in (data, store, os.path.join(store, "sub")):
            os.chmod(directory, 0o755)
        files = [os.path.join(store, "CURRENT"), os.path.join(store, "000005.ldb"),
                 os.path.join(store, "sub", "x")]
        for name in files:
            with open(name, "w"):
                pass
            os.chmod(name, 0o644)
        os.chmod(files[1], 0o664)
        corrected = secure_data_dir(data)
        self.assertEqual(len(corrected), 6)
        self.assertIn((files[1], 0o664), corrected)
        for directory in (data, store, os.path.join(store, "sub")):
            self.assertEqual(mode(directory), 0o700, directory)
        for name in files:
            self.assertEqual(mode(name), 0o600, name)
        self.assertEqual(secure_data_dir(data), [])

    def test_owner_bits_kept(self):
        """A file's own permissions stay as they were: only group and others lose theirs."""
        data = self.mktemp()
        os.makedirs(os.path.join(data, "store"), mode=0o700)
        os.chmod(data, 0o700)
        name = os.path.join(data, "store", "LOCK")
        with open(name, "w"):
            pass
        os.chmod(name, 0o444)
        self.assertEqual(secure_data_dir(data), [(name, 0o444)])
        self.assertEqual(mode(name), 0o400)

    def test_links_left_alone(self):
        """A symbolic link in the store is not followed to change what it points at."""
        data = self.mktemp()
        os.makedirs(os.path.join(data, "store"), mode=0o700)
        os.chmod(data, 0o700)
        outside = os.path.abspath(self.mktemp())
        with open(outside, "w"):
            pass
        os.chmod(outside, 0o644)
        os.symlink(outside, os.path.join(data, "store", "link"))
        self.assertEqual(secure_data_dir(data), [])
        self.assertEqual(mode(outside), 0o644)

    def test_linked_data_dir_followed(self):
        """A data dir that is a link is judged, and tightened, by what it points at."""
        target = os.path.abspath(self.mktemp())
        os.makedirs(target)
        os.chmod(target, 0o755)
        link = self.mktemp()
        os.symlink(target, link)
        self.assertEqual(secure_data_dir(link), [(link, 0o755)])
        self.assertEqual(mode(target), 0o700)
        self.assertEqual(secure_data_dir(link), [])

    def test_not_a_directory(self):
        """A data dir path that is a file is one clear error."""
        path = self.mktemp()
        with open(path, "w"):
            pass
        with self.assertRaises(DataDirError) as caught:
            secure_data_dir(path)
        self.assertIn("cannot make the data directory owner-only", str(caught.exception))


class UmaskTests(SynchronousTestCase):
    """L{restrict_umask} takes every permission from group and others, never loosening."""

    def setUp(self):
        previous = os.umask(0o022)
        self.addCleanup(os.umask, previous)

    def test_adds_private_bits(self):
        """From 022 the umask becomes 077; the old value is returned."""
        self.assertEqual(restrict_umask(), 0o022)
        self.assertEqual(os.umask(0o022), 0o077)

    def test_keeps_stricter(self):
        """A umask already stricter than 077 stays."""
        os.umask(0o277)
        restrict_umask()
        self.assertEqual(os.umask(0o022), 0o277)
