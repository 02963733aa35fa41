// Per-query BM25 latency of Anserini (issue 4 speed benchmark), the counterpart of
// `convrag search --topics FILE --timing`: each topic once to warm up, then once timed, one thread.
// Build and run (scripts/bench-speed.sh does it):
//   javac -cp ANSERINI_FATJAR -d DIR scripts/BenchLatency.java
//   java -cp ANSERINI_FATJAR:DIR BenchLatency INDEX TOPICS.tsv K
import io.anserini.search.SimpleSearcher;
import java.nio.file.*;
import java.util.*;

public class BenchLatency {
  public static void main(String[] args) throws Exception {
    SimpleSearcher s = new SimpleSearcher(args[0]);
    s.set_bm25(0.9f, 0.4f);
    int k = Integer.parseInt(args[2]);
    List<String> qs = new ArrayList<>();
    for (String l : Files.readAllLines(Paths.get(args[1]))) {
      int t = l.indexOf('\t');
      if (t > 0) qs.add(l.substring(t + 1));
    }
    for (String q : qs) s.search(q, k);
    double[] ms = new double[qs.size()];
    for (int i = 0; i < qs.size(); i++) {
      long t0 = System.nanoTime();
      s.search(qs.get(i), k);
      ms[i] = (System.nanoTime() - t0) / 1e6;
    }
    Arrays.sort(ms);
    double sum = 0;
    for (double m : ms) sum += m;
    System.out.printf("latency k=%d: p50 %.2f ms, p95 %.2f ms, mean %.2f ms over %d queries (one thread, warm)%n",
        k, ms[(int) Math.ceil(ms.length * 0.5) - 1], ms[(int) Math.ceil(ms.length * 0.95) - 1], sum / ms.length, ms.length);
    s.close();
  }
}
