// Toggle points of signal kinds: scalar, vectors (descending, ascending, offset ranges), a
// logic enum, a packed struct, packed multi-dimensional, unpacked arrays (1 and 2 dimensions),
// an int port (counted) and int/integer variables (not counted), `_`-prefixed names (not
// counted), an implicit net, a bus wider than 256 bits (not counted), a parameter-sized vector.
module signals #(parameter W = 6) (input clk, input [3:0] a, input int k, output [W-1:0] o);
  typedef enum logic [1:0] {IDLE, RUN, DONE} state_t;
  typedef struct packed { logic [2:0] hi; logic lo; } pair_t;
  state_t state;
  pair_t pair;
  reg [0:3] asc;
  reg [5:2] offs;
  logic [1:0][2:0] md;
  reg [3:0] mem [0:2];
  reg [1:0] grid [2][2];
  int counter;
  integer total;
  reg _hidden;
  reg [299:0] wide;
  reg [W-1:0] sized;
  signals_sub sub (.x(a[0]), .y(implicit_y));
  assign o = sized;
  always @(posedge clk) begin
    state <= state == IDLE ? RUN : state == RUN ? DONE : IDLE;
    pair <= {a[3:1], a[0]};
    asc <= a;
    offs <= ~a;
    md <= {a[1:0], a[3:2], a[2:1]};
    mem[a[1:0] % 3] <= a;
    grid[a[0]][a[1]] <= a[3:2];
    counter <= counter + k;
    total <= total + 1;
    _hidden <= a[0];
    wide <= {wide[298:0], a[0]};
    sized <= sized + a + implicit_y;
  end
endmodule

module signals_sub (input x, output y);
  assign y = ~x;
endmodule
