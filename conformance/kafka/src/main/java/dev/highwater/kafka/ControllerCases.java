package dev.highwater.kafka;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.function.IntPredicate;

import org.apache.kafka.common.DirectoryId;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.controller.PartitionChangeBuilder;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.MetadataVersion;

/**
 * Kafka's own controller rules over an enumeration of partition states, for the differential
 * test {@code conformance/tests/kafka_controller.rs}. Every partition change is computed by Kafka's
 * {@code PartitionChangeBuilder} (metadata module) and applied with
 * {@code PartitionRegistration.merge}; which change each event makes is set up as
 * {@code ReplicationControlManager} does it (named at each event below), since that class needs a
 * whole controller around it.
 *
 * <p>States: replication factor 2 to 5 (replicas 0..n-1, in that order), every ISR, ELR (disjoint
 * from the ISR, as Kafka keeps it), LastKnownElr (empty or one replica, as Kafka 4.x keeps it: the
 * last leader), leader (none or an ISR member), set of unfenced brokers, leader recovery state;
 * min.insync.replicas 1 to n, ELR on and off (off: ELR and LastKnownElr empty, as Kafka clears them
 * when the feature is off), unclean election on and off, the last-known-leader election on and off
 * (Kafka 4.x: on). Events: each broker fenced, shut down uncleanly (re-registration), unfenced
 * (only a fenced one); the leader's AlterPartition removing or adding each replica; a preferred and
 * an unclean election request; and each broker's restart, clean or unclean (re-registration, then
 * unfencing).
 *
 * <p>One line per case: {@code n m f L II EE KK UU R c AA} (no spaces: hex digits; f = flags, bit 0
 * ELR, bit 1 unclean election, bit 2 last-known-leader election; L = leader, {@code f} for none;
 * II, EE, KK, UU = ISR, ELR, LastKnownElr and unfenced brokers as bit masks; R = 1 when
 * RECOVERING; c = event: F fence, S unclean shutdown, U unfence, A AlterPartition, P preferred
 * election, E unclean election, C clean restart, D unclean restart; AA = the broker, or the new
 * ISR), a space, then Kafka's answer: {@code n} (no change), {@code x} and a reason ({@code i}
 * ineligible replica, {@code v} invalid request, {@code e} election not needed), or {@code c} and
 * the partition after it: {@code L II EE KK b R} (b = leader epoch increase).
 */
final class ControllerCases {
    private ControllerCases() {
    }

    private static final Uuid TOPIC = Uuid.fromString("AAAAAAAAAAAAAAAAAAAAAQ");
    private static final MetadataVersion VERSION = MetadataVersion.latestProduction();

    static void run(String[] args) throws IOException {
        Map<String, String> o = LogSupport.parseArgs(args, 0);
        int minN = Integer.parseInt(o.getOrDefault("min-replicas", "2"));
        int maxN = Integer.parseInt(o.getOrDefault("max-replicas", "5"));
        long seed = Long.parseLong(o.getOrDefault("seed", "0"));
        // For replica count n, keep one case in 2^shift (the n-th of a comma-separated list,
        // counting from 0; 0: every case), chosen by a hash of the case number and the seed.
        String[] shifts = o.getOrDefault("sample-shift", "0").split(",");
        if (minN < 2 || maxN > 5 || minN > maxN) {
            throw new IllegalArgumentException("replica counts go from 2 to 5");
        }
        OutputStream out = new BufferedOutputStream(System.out, 1 << 20);
        Line line = new Line(out);
        long total = 0;
        for (int n = minN; n <= maxN; n++) {
            int shift = Integer.parseInt(shifts[Math.min(n, shifts.length - 1)]);
            total += enumerate(n, shift, seed, line);
        }
        out.flush();
        System.err.println("controller-cases: " + total + " cases");
    }

    /** Every state and event for replica count n; returns how many cases were printed. */
    private static long enumerate(int n, int shift, long seed, Line line) throws IOException {
        long printed = 0;
        long index = 0;
        int all = (1 << n) - 1;
        int roles = 1;
        for (int i = 0; i < n; i++) {
            roles *= 3;
        }
        for (int flags = 0; flags < 8; flags++) {
            boolean elr = (flags & 1) != 0;
            boolean lkl = (flags & 4) != 0;
            // Without the ELR, LastKnownElr is empty and the last-known-leader switch is moot.
            if (!elr && !lkl) {
                continue;
            }
            for (int minIsr = 1; minIsr <= n; minIsr++) {
                for (int r = 0; r < roles; r++) {
                    int isr = 0;
                    int elrSet = 0;
                    int code = r;
                    for (int i = 0; i < n; i++) {
                        int role = code % 3;
                        code /= 3;
                        if (role == 1) {
                            isr |= 1 << i;
                        } else if (role == 2) {
                            elrSet |= 1 << i;
                        }
                    }
                    if (!elr && elrSet != 0) {
                        continue;
                    }
                    for (int leader = -1; leader < n; leader++) {
                        if (leader >= 0 && (isr & (1 << leader)) == 0) {
                            continue;
                        }
                        for (int lke = -1; lke < (elr ? n : 0); lke++) {
                            int lkeSet = lke < 0 ? 0 : 1 << lke;
                            for (int unfenced = 0; unfenced <= all; unfenced++) {
                                for (int recovering = 0; recovering < 2; recovering++) {
                                    State s = new State(n, minIsr, flags, leader, isr, elrSet, lkeSet,
                                        unfenced, recovering == 1);
                                    PartitionRegistration p = null;
                                    for (Event e : events(s)) {
                                        index++;
                                        if (shift > 0 && (mix(index ^ seed) >>> (64 - shift)) != 0) {
                                            continue;
                                        }
                                        if (p == null) {
                                            p = s.registration();
                                        }
                                        line.write(s, e, answer(s, p, e));
                                        printed++;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        return printed;
    }

    /** SplitMix64's finaliser: a well-spread hash of a case number. */
    private static long mix(long z) {
        z += 0x9e3779b97f4a7c15L;
        z = (z ^ (z >>> 30)) * 0xbf58476d1ce4e5b9L;
        z = (z ^ (z >>> 27)) * 0x94d049bb133111ebL;
        return z ^ (z >>> 31);
    }

    record State(int n, int minIsr, int flags, int leader, int isr, int elr, int lke, int unfenced,
                 boolean recovering) {
        boolean elrOn() {
            return (flags & 1) != 0;
        }

        boolean uncleanOn() {
            return (flags & 2) != 0;
        }

        boolean lklOn() {
            return (flags & 4) != 0;
        }

        PartitionRegistration registration() {
            int[] replicas = new int[n];
            Uuid[] dirs = new Uuid[n];
            for (int i = 0; i < n; i++) {
                replicas[i] = i;
                dirs[i] = DirectoryId.UNASSIGNED;
            }
            return new PartitionRegistration.Builder()
                .setReplicas(replicas)
                .setDirectories(dirs)
                .setIsr(ids(isr))
                .setRemovingReplicas(new int[0])
                .setAddingReplicas(new int[0])
                .setElr(ids(elr))
                .setLastKnownElr(ids(lke))
                .setLeader(leader)
                .setLeaderRecoveryState(recovering ? LeaderRecoveryState.RECOVERING : LeaderRecoveryState.RECOVERED)
                .setLeaderEpoch(5)
                .setPartitionEpoch(7)
                .build();
        }
    }

    record Event(char kind, int arg) {
    }

    /** The events enumerated for a state. */
    private static List<Event> events(State s) {
        List<Event> out = new ArrayList<>();
        for (int b = 0; b < s.n; b++) {
            out.add(new Event('F', b));
            out.add(new Event('S', b));
            if ((s.unfenced & (1 << b)) == 0) {
                out.add(new Event('U', b));
            }
            out.add(new Event('C', b));
            out.add(new Event('D', b));
        }
        if (s.leader >= 0) {
            for (int b = 0; b < s.n; b++) {
                if (b != s.leader) {
                    out.add(new Event('A', s.isr ^ (1 << b)));
                }
            }
        }
        out.add(new Event('P', 0));
        out.add(new Event('E', 0));
        return out;
    }

    /** Kafka's answer: null for no change, a Refusal, or the partition after the change. */
    private static Object answer(State s, PartitionRegistration p, Event e) {
        switch (e.kind) {
            case 'C', 'D' -> {
                // A restart: re-registration (handleBrokerShutdown), then unfencing
                // (handleBrokerUnfenced), one after the other.
                Object first = single(s, p, new Event(e.kind == 'C' ? 'F' : 'S', e.arg), s.unfenced);
                PartitionRegistration mid = first instanceof PartitionRegistration q ? q : p;
                int fenced = s.unfenced & ~(1 << e.arg);
                Object second = single(s, mid, new Event('U', e.arg), fenced);
                if (second instanceof PartitionRegistration) {
                    return second;
                }
                return first;
            }
            default -> {
                return single(s, p, e, s.unfenced);
            }
        }
    }

    enum Refusal { INELIGIBLE, INVALID, NOT_NEEDED }

    /**
     * One event, set up as ReplicationControlManager sets up the builder (generateLeaderAndIsrUpdates,
     * alterPartition with validateAlterPartitionData, electLeader), with the brokers in
     * {@code unfenced} active.
     */
    private static Object single(State s, PartitionRegistration p, Event e, int unfenced) {
        int b = e.arg;
        int isr = mask(p.isr);
        int elr = mask(p.elr);
        switch (e.kind) {
            case 'F' -> {
                // handleBrokerFenced (and handleBrokerInControlledShutdown, and handleBrokerShutdown
                // after a clean shutdown): partitionsWithBrokerInIsr, brokerToRemove = b.
                if ((isr & (1 << b)) == 0) {
                    return null;
                }
                return build(s, p, builder(s, p, acceptor(unfenced & ~(1 << b)))
                    .setTargetIsr(list(isr & ~(1 << b))));
            }
            case 'S' -> {
                // handleBrokerShutdown(b, clean = false): with the ELR, partitionsWithBrokerInIsr
                // then partitionsWithBrokerInElr, brokerWithUncleanShutdown = b; without it, as 'F'.
                if (!s.elrOn()) {
                    return single(s, p, new Event('F', b), unfenced);
                }
                if (((isr | elr) & (1 << b)) == 0) {
                    return null;
                }
                return build(s, p, builder(s, p, acceptor(unfenced & ~(1 << b)))
                    .setUncleanShutdownReplicas(List.of(b))
                    .setTargetIsr(list(isr & ~(1 << b))));
            }
            case 'U' -> {
                // handleBrokerUnfenced: partitionsWithNoLeader, brokerToAdd = b.
                if (p.leader != -1) {
                    return null;
                }
                return build(s, p, builder(s, p, acceptor(unfenced | (1 << b))).setTargetIsr(list(isr)));
            }
            case 'A' -> {
                // alterPartition from the leader, whose Partition marks itself RECOVERED:
                // validateAlterPartitionData, then the builder.
                int newIsr = b;
                if ((newIsr & (1 << p.leader)) == 0) {
                    return Refusal.INVALID;
                }
                // ineligibleReplicasForIsr (KIP-841): every member must be registered, unfenced
                // and not shutting down.
                if ((newIsr & ~unfenced) != 0) {
                    return Refusal.INELIGIBLE;
                }
                return build(s, p, builder(s, p, acceptor(unfenced))
                    .setTargetIsr(list(newIsr))
                    .setTargetLeaderRecoveryState(LeaderRecoveryState.RECOVERED));
            }
            case 'P' -> {
                // electLeader(PREFERRED)
                if (p.hasPreferredLeader()) {
                    return Refusal.NOT_NEEDED;
                }
                return build(s, p, builder(s, p, acceptor(unfenced))
                    .setElection(PartitionChangeBuilder.Election.PREFERRED));
            }
            case 'E' -> {
                // electLeader(UNCLEAN)
                if (p.hasLeader()) {
                    return Refusal.NOT_NEEDED;
                }
                return build(s, p, builder(s, p, acceptor(unfenced))
                    .setElection(PartitionChangeBuilder.Election.UNCLEAN));
            }
            default -> throw new IllegalStateException("event " + e.kind);
        }
    }

    private static IntPredicate acceptor(int acceptable) {
        return r -> r >= 0 && r < 8 && (acceptable & (1 << r)) != 0;
    }

    private static PartitionChangeBuilder builder(State s, PartitionRegistration p, IntPredicate acceptor) {
        PartitionChangeBuilder b = new PartitionChangeBuilder(p, TOPIC, 0, acceptor, VERSION, s.minIsr, s.elrOn())
            .setUseLastKnownLeaderInBalancedRecovery(s.lklOn())
            .setDefaultDirProvider(r -> DirectoryId.UNASSIGNED);
        if (s.uncleanOn()) {
            b.setElection(PartitionChangeBuilder.Election.UNCLEAN);
        }
        return b;
    }

    private static Object build(State s, PartitionRegistration p, PartitionChangeBuilder b) {
        Optional<ApiMessageAndVersion> record = b.build();
        return record.map(r -> (Object) p.merge((PartitionChangeRecord) r.message())).orElse(null);
    }

    private static int[] ids(int mask) {
        int[] out = new int[Integer.bitCount(mask)];
        int k = 0;
        for (int i = 0; i < 8; i++) {
            if ((mask & (1 << i)) != 0) {
                out[k++] = i;
            }
        }
        return out;
    }

    private static List<Integer> list(int mask) {
        List<Integer> out = new ArrayList<>();
        for (int i : ids(mask)) {
            out.add(i);
        }
        return out;
    }

    private static int mask(int[] ids) {
        int m = 0;
        for (int i : ids) {
            m |= 1 << i;
        }
        return m;
    }

    /** Writes case lines without building strings. */
    private static final class Line {
        private static final byte[] HEX = "0123456789abcdef".getBytes();
        private final OutputStream out;
        private final byte[] buf = new byte[64];
        private int len;

        Line(OutputStream out) {
            this.out = out;
        }

        void write(State s, Event e, Object answer) throws IOException {
            len = 0;
            hex1(s.n);
            hex1(s.minIsr);
            hex1(s.flags);
            hex1(s.leader < 0 ? 15 : s.leader);
            hex2(s.isr);
            hex2(s.elr);
            hex2(s.lke);
            hex2(s.unfenced);
            hex1(s.recovering ? 1 : 0);
            buf[len++] = (byte) e.kind;
            hex2(e.arg);
            buf[len++] = ' ';
            if (answer == null) {
                buf[len++] = 'n';
            } else if (answer instanceof Refusal r) {
                buf[len++] = 'x';
                buf[len++] = switch (r) {
                    case INELIGIBLE -> (byte) 'i';
                    case INVALID -> (byte) 'v';
                    case NOT_NEEDED -> (byte) 'e';
                };
            } else {
                PartitionRegistration q = (PartitionRegistration) answer;
                buf[len++] = 'c';
                hex1(q.leader < 0 ? 15 : q.leader);
                hex2(mask(q.isr));
                hex2(mask(q.elr));
                hex2(mask(q.lastKnownElr));
                hex1(q.leaderEpoch - 5);
                hex1(q.leaderRecoveryState == LeaderRecoveryState.RECOVERING ? 1 : 0);
            }
            buf[len++] = '\n';
            out.write(buf, 0, len);
        }

        private void hex1(int v) {
            buf[len++] = HEX[v & 15];
        }

        private void hex2(int v) {
            hex1(v >> 4);
            hex1(v);
        }
    }
}
